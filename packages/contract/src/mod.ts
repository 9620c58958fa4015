/**
 * The ingest contract (SPEC sections 3 and 11), one module for every party: the gRPC and HTTP
 * transports of ingest, the client library, the CLI and the test fakes. It holds the call types,
 * the rules of a call, the limits, the message-id and timestamp rules, and the mapping to the
 * stored call. A new field of the webhook body is a change here (and in the .proto), not in each
 * party.
 */

export {
  ADMIN_PAGE_MAX_BYTES,
  ADMIN_PAGES,
  allPages,
  answerBytes,
  PageBudget,
  type PageLimit,
  pageSize,
  pageSizeViolation,
} from "./admin-pages.js";
export {
  httpStatusFilterOf,
  LOG_STATUS_NAMES,
  type LogStatusName,
  logStatusOf,
  MAX_SEARCH_TEXT_CHARS,
  type SearchFilterFields,
  searchFilterViolations,
} from "./attempt-search.js";
export {
  CALL_STRING_FIELDS,
  CALL_TYPE_FIELDS,
  CALL_TYPES,
  type CallType,
  type ContractCall,
  isCallType,
} from "./call.js";
export { CLIENT_SETTINGS, type ClientSetting, clientSetting, userVariables } from "./config/client-env.js";
export {
  type ConsentDecision,
  type ConsentSettings,
  consentDecision,
  filteredText,
} from "./consent.js";
// The destination rules are public as a whole (the admin service, the store and the CLI's apply
// files check the same fields with them): a rule added there needs no second list here.
export * from "./destination-rules.js";
export { formatDuration, parseDuration } from "./duration.js";
export { whskProblem } from "./ed25519-secret-key.js";
export { Code, type FieldViolation, HookpostError } from "./grpc/hookpost-error.js";
export { type JsonTextScan, scanJsonText } from "./json-text.js";
export {
  DEFAULT_MAX_BATCH_CALLS,
  MAX_BATCH_BYTES,
  MAX_CALL_BYTES,
  MAX_MESSAGE_ID_CHARS,
  MAX_OBJECT_DEPTH,
  MAX_REPLAY_SEQUENCES,
  MAX_REPORTED_VIOLATIONS,
} from "./limits.js";
export { MESSAGE_ID_RULE, messageIdProblem } from "./message-id.js";
export { EVENT_TYPES, type EventType, isEventType, type StoredCall } from "./model/stored-call.js";
export { numberLiteralProblem, numberValueProblem } from "./numbers.js";
export { objectProblem, protoKeyProblem } from "./objects.js";
export {
  behindAfterViolations,
  DEFAULT_BEHIND_AFTER_MS,
  DEFAULT_FAILING_BELOW,
  eventTypesViolations,
  failingBelowViolations,
  isOperatorEventType,
  MAX_BEHIND_AFTER_MS,
  MAX_OPERATOR_WEBHOOK_ID_CHARS,
  MAX_OPERATOR_WEBHOOKS,
  MIN_BEHIND_AFTER_MS,
  MIN_FAILING_BELOW,
  OPERATOR_EVENT_TYPES,
  type OperatorEventType,
  operatorSecretViolations,
  operatorUrlViolations,
  recoveredAtOrAbove,
} from "./operator-webhook-rules.js";
export {
  allowedOriginsViolations,
  MAX_ALLOWED_ORIGINS,
  MAX_ORIGIN_CHARS,
  normalizeOrigin,
  normalizeOrigins,
  originAllowed,
} from "./origins.js";
export {
  MAX_PORTAL_DESTINATIONS_PER_SOURCE,
  MAX_PORTAL_LINK_NAME_CHARS,
  MAX_PORTAL_LINKS_PER_SOURCE,
  PORTAL_FRAGMENT_KEY,
  PORTAL_LINK_LIFETIME,
  PORTAL_LINK_WRITE_RATE,
  PORTAL_TOKEN_PREFIX,
  portalLinkLifetimeViolations,
  portalLinkNameViolations,
  portalLinkUrl,
} from "./portal-links.js";
export { batchCallRanges, callSchemaByType, callSchemaOf, findLoss, type Loss } from "./proto-bytes.js";
export { fromProtoCall, type ProtoCall } from "./proto-call.js";
export { protoBatchViolations, protoCallViolations } from "./proto-rules.js";
export { acceptedBatchCalls, acceptedCall } from "./proto-wire.js";
export {
  batchCountProblem,
  batchSizeProblem,
  batchSizeViolations,
  type CallSize,
  callSizeProblem,
  validateCall,
} from "./rules.js";
export {
  type BatchingSettings,
  batchingLimits,
  batchingViolations,
  DEFAULT_BATCHING_BYTES,
  DEFAULT_BATCHING_CALLS,
  DEFAULT_BATCHING_WAIT_MS,
  type DeliveryModeName,
  deliveryModeOf,
  deliveryModeValue,
  deliveryModeViolations,
  expressionViolations,
  type FilterSettings,
  filterListsDecision,
  filterViolations,
  httpMethodOf,
  MAX_BATCHING_BYTES,
  MAX_BATCHING_CALLS,
  MAX_BATCHING_WAIT_MS,
  MAX_EXPRESSION_CHARS,
  type Method,
  MIN_BATCHING_BYTES,
  methodOf,
  methodViolations,
  type RetrySettings,
  retryViolations,
} from "./shaping-rules.js";
export {
  type BatchingView,
  batchingView,
  type FilterView,
  filterView,
  parseDurationList,
  type RetryView,
  retryView,
} from "./shaping-text.js";
export { type ServerCallIds, type Stamp, serverCall, toStoredCall } from "./stored-call.js";
export {
  fillTemplate,
  isTemplate,
  MAX_PLACEHOLDER_CHARS,
  parseTemplate,
  type TemplatePart,
} from "./template.js";
export {
  hasControlChar,
  hasLineBreakOrNul,
  hasLoneSurrogate,
  hasSpaceOrControl,
  isHeaderValueText,
  withoutLoneSurrogates,
} from "./text.js";
export {
  fromDate,
  fromProtoTimestamp,
  InvalidTimestamp,
  MAX_TIMESTAMP_MS,
  MIN_TIMESTAMP_MS,
  parseIsoTimestamp,
  TIMESTAMP_FORMS,
  TIMESTAMP_RANGE,
  type Timestamp,
  timestampProblem,
} from "./timestamp.js";
export { type FieldNaming, fieldName, type Violation } from "./violation.js";
