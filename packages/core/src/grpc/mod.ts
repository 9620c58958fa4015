export { Code, type FieldViolation, HookpostError } from "@hookpost/contract";
export {
  addService,
  type CallContext,
  type RawRequest,
  rawHandler,
  type ServeOptions,
  type ServiceImpl,
} from "./server.js";
