/**
 * `hookpost/client`: queue analytics calls in memory and send them to Hookpost's ingest service
 * in batches, in the background.
 *
 * ```ts
 * const analytics = new Analytics(process.env.WRITE_KEY!);
 * analytics.on("error", (err) => console.error(err.code, err.message, err.calls.length));
 * analytics.track({ userId: "u1", event: "Signed Up", properties: { plan: "pro" } });
 * await analytics.close();
 * ```
 */

export {
  MAX_BATCH_BYTES,
  MAX_CALL_BYTES,
  MAX_MESSAGE_ID_CHARS,
  MAX_MESSAGE_ID_CHARS as MAX_MESSAGE_ID_LENGTH,
  MESSAGE_ID_RULE,
} from "@hookpost/contract";
export { Analytics, type AnalyticsEvents, type CloseOptions } from "./analytics.js";
export type { Callback } from "./analytics-error.js";
export { AnalyticsError, type AnalyticsErrorCode } from "./analytics-error.js";
export { type CallFields, CallTooLargeError, encodeFrame } from "./call-encoder.js";
export type {
  AliasParams,
  Call,
  CallType,
  CommonFields,
  GroupParams,
  IdentifyParams,
  PageParams,
  ParamsByType,
  Payload,
  ScreenParams,
  TrackParams,
} from "./calls.js";
export { debugEnabled } from "./debug.js";
export {
  adminMetadata,
  type CallOptions,
  type ClientOptions,
  createClient,
  type ServiceClient,
  writeKeyMetadata,
} from "./grpc/client.js";
export { LIBRARY } from "./library.js";
export { type AnalyticsOptions, DEFAULT_ENDPOINT, DEFAULTS } from "./options.js";
export { batchRequestOf, decodeFrame } from "./wire.js";
