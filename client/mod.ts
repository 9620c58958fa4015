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
} from "../contract/mod.js";
export { Analytics, type AnalyticsEvents, type CloseOptions } from "./analytics.js";
export { AnalyticsError, type AnalyticsErrorCode } from "./analytics-error.js";
export type {
  AliasParams,
  Call,
  Callback,
  CallType,
  CommonFields,
  GroupParams,
  IdentifyParams,
  PageParams,
  Payload,
  ScreenParams,
  TrackParams,
} from "./calls.js";
export { debugEnabled } from "./debug.js";
export { LIBRARY } from "./library.js";
export { type AnalyticsOptions, DEFAULT_ENDPOINT, DEFAULTS } from "./options.js";
