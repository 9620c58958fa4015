export {
  adminMetadata,
  type CallOptions,
  type ClientOptions,
  createClient,
  type ServiceClient,
  writeKeyMetadata,
} from "./client.js";
export { Code, type FieldViolation, HookpostError } from "./hookpost-error.js";
export {
  addService,
  type CallContext,
  type RawRequest,
  rawHandler,
  type ServeOptions,
  type ServiceImpl,
} from "./server.js";
