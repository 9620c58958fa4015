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
export { MAX_CALL_BYTES } from "./encode.js";
export { LIBRARY } from "./library.js";
export { type AnalyticsOptions, DEFAULT_ENDPOINT, DEFAULTS } from "./options.js";
export { MAX_MESSAGE_ID_LENGTH } from "./validate.js";
