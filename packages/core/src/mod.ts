/** The public entry point of @hookpost/core: what other packages may import. */

export {
  BREAKER_STALE_MS,
  type BreakerFigures,
  HealthAggregate,
  type HealthFigures,
  healthSummaryFeed,
} from "./attempts/health.js";
export {
  type BreakerReport,
  type BreakerState,
  type DestinationDelta,
  type HealthSummary,
  HealthTally,
} from "./attempts/health-tally.js";
export { AttemptLog, type AttemptLogOptions, type DropReason } from "./attempts/publisher.js";
export {
  type AttemptPage,
  type AttemptQuery,
  AttemptReader,
  attemptBytes,
  type MessageRecords,
  parse,
} from "./attempts/reader.js";
export {
  ATTEMPT_SUBJECTS,
  ATTEMPTS_STREAM,
  type AttemptRecord,
  attemptRecordSubject,
  attemptSubject,
  type ConsentFiltered,
  type DeadRecord,
  deadRecordOf,
  deadRecordSubject,
  deliveredJson,
  deliveredRecord,
  healthSubject,
  type LogRecord,
  messageHash,
  type OutcomeKind,
  outcomeKind,
  RESPONSE_EXCERPT_BYTES,
  type RoutedFacts,
  type RoutedRecord,
  routedRecordSubject,
  routedSubject,
  type Stored,
  statusClass,
  storedRecordsOf,
} from "./attempts/record.js";
export {
  AttemptIndex,
  type AttemptIndexOptions,
  IndexData,
  type Unit,
} from "./attempts/search/attempt-index.js";
export {
  eventHash,
  type Facets,
  INTEGRATIONS_FILTERED,
  type Indexed,
  indexedOf,
  messageKey,
  recordTime,
  type SearchStatus,
  STATUS,
  STATUS_CODES,
  type StatusCode,
  searchStatusOf,
  typeCode,
  typeName,
  userKeyOf,
} from "./attempts/search/entries.js";
export { Plan, type SearchFilter } from "./attempts/search/plan.js";
export {
  AttemptSearch,
  type Cursor,
  MAX_READS,
  MESSAGE_RECORDS_MAX,
  RECORD_DONE,
  type SearchHit,
  type SearchOptions,
  type SearchPage,
} from "./attempts/search/search.js";
export {
  DEFAULT_SPANS,
  keyParts,
  L0_KEY_BYTES,
  L1_KEY_BYTES,
  readKeyPart,
  type SegmentHeader,
  type Spans,
} from "./attempts/search/segment.js";
export {
  AuditLog,
  type AuditPage,
  type AuditQuery,
  auditEntryBytes,
} from "./audit/audit-log.js";
export type {
  AuditActor,
  AuditChange,
  AuditEntry,
  AuditOutcomeRecord,
  AuditRequestRecord,
  AuditStoredRecord,
} from "./audit/record.js";
export { changedFields, REDACTED, redact, redactFieldKeys } from "./audit/redact.js";
export {
  AlreadyExistsError,
  type ConfigChange,
  ConfigStore,
  type ConfigStoreOptions,
  ConflictError,
  MAX_CHANGE_ATTEMPTS,
} from "./config/config-store.js";
export { registerConfigRevision } from "./config/revision-metric.js";
export {
  type DeprecationWarn,
  defaultFor,
  loadSettings,
  processEnvironment,
  renderSettingsDocs,
  SETTINGS,
  type Service,
  type SettingName,
  type Settings,
} from "./config/schema.js";
export {
  type DeadLetterPage,
  DeadLetters,
  deadLetterBytes,
  type ListOptions,
} from "./dead-letters/dead-letters.js";
export {
  CALL_TYPE_HEADER,
  callFields,
  callRecordFields,
  deliveryMsgId,
  EVENT_HEADER,
  EVENT_SEQ_HEADER,
  FIRST_TIME_HEADER,
  loggedEvent,
  MAX_LOGGED_EVENT_CHARS,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  type RecordFields,
  recordFields,
  SOURCE_ID_HEADER,
  setCallHeaders,
  USER_HASH_HEADER,
  userHashField,
} from "./dead-letters/delivery-headers.js";
export type {
  DeadLetter,
  DeadLetterRecord,
  FailureKind,
  UrlOutcomeRecord,
} from "./dead-letters/record.js";
export { DEFAULT_GRPC_LIMITS, grpcLimitsFrom } from "./env/grpc-env.js";
export { listenError } from "./env/listen-error.js";
export { DEFAULT_OPS_LIMITS, opsLimitsFrom } from "./env/ops-env.js";
export { ConfigError } from "./env/read-env.js";
export { keyringFrom, PLAIN_SECRETS_WARNING } from "./env/secrets-env.js";
export { setOnly } from "./env/set-only.js";
export { topologyFrom } from "./env/topology-env.js";
export { tracingEnabledFromEnv } from "./env/tracing-env.js";
export {
  addCounts,
  type DeletionRecord,
  type ErasedCounts,
  NO_ERASURES,
} from "./erasure/deletion-record.js";
export { DeletionStore, type DeletionStoreOptions } from "./erasure/deletion-store.js";
export { eraseMemberships, type MembershipErasure } from "./erasure/erase-memberships.js";
export { erasePass } from "./erasure/erase-pass.js";
export { ErasureWorker, type ErasureWorkerOptions } from "./erasure/erasure-worker.js";
export { DomainError, type DomainErrorCode } from "./errors.js";
export { getOrInsert } from "./get-or-insert.js";
export { CONNECT_JSON_OPTIONS, connectImpl, peerKey, toConnectError } from "./grpc/connect-service.js";
export { domainStatus, toHookpostError } from "./grpc/domain-status.js";
export {
  type GrpcListener,
  type GrpcListenerStats,
  type GrpcServerLimits,
  grpcServerOptions,
  listenGrpc,
} from "./grpc/listener.js";
export { LOST_MAP_KEY, lostMapKeys } from "./grpc/proto-map-keys.js";
export {
  addService,
  type CallContext,
  type ClientStreamingHandler,
  decodeRequest,
  internal,
  type RawOutput,
  type RawRequest,
  type RawUnaryHandler,
  rawHandler,
  type ServeOptions,
  type ServiceImpl,
  type UnaryHandler,
} from "./grpc/server.js";
export { createLogger, type Logger } from "./log/logger.js";
export { MergeSource, RunBuilder, type SortOptions } from "./membership/external-sort.js";
export {
  EMPTY_SOURCE,
  type Entry,
  escapeField,
  formatEntry,
  LineFileWriter,
  LineReader,
  LineSource,
  parseEntry,
  type SortedSource,
  unescapeField,
} from "./membership/lines.js";
export {
  type LeftoverChunks,
  MEMBERSHIPS_BUCKET,
  MEMBERSHIPS_STREAM,
  type MembershipKind,
  MembershipStore,
  type MembershipStoreOptions,
  type MembershipVersion,
  membershipObjectName,
  type StoredMembership,
} from "./membership/membership-store.js";
export { PublishWindow } from "./membership/publish-window.js";
export {
  type DestinationFilterRecord,
  type DestinationRecord,
  type Signing,
  signingSecrets,
} from "./model/destination.js";
export {
  isOperatorTarget,
  type OperatorWebhookRecord,
  operatorTarget,
  operatorTargetId,
  wantsEvent,
} from "./model/operator-webhook.js";
export { generateWriteKey, hashWriteKey, type SourceRecord, writeKeyPrefix } from "./model/source.js";
export { AckReplay, type AckReplayOptions } from "./nats/ack-replay.js";
export { type ConfirmingMsg, confirmingAck } from "./nats/confirmed-ack.js";
export { connectNats, drainNats } from "./nats/connect.js";
export { ConnectionState } from "./nats/connection-state.js";
export { deleteMessages } from "./nats/delete-messages.js";
export { EncodedHeaders, MapHeaders, msgIdHeaders } from "./nats/headers.js";
export {
  isAlreadyDeleted,
  isAlreadyExists,
  isNoResponders,
  isNotFound,
  isStreamFull,
  isTransient,
  isWrongLastSequence,
  JetStreamErrorCode,
  jetStreamErrorCode,
  jetStreamErrorText,
  natsFailure,
  STREAM_FULL_RETRY_AFTER_MS,
} from "./nats/jetstream-errors.js";
export { nextMessage } from "./nats/next-message.js";
export {
  PipelinedPublisher,
  type PubAckLite,
  PublishError,
  type ReplyLite,
} from "./nats/pipelined-publisher.js";
export { scanStream } from "./nats/scan-stream.js";
export { StreamFeed, type StreamFeedOptions } from "./nats/stream-feed.js";
export { countIfFull, registerStreamFull, StreamWatch } from "./nats/stream-watch.js";
export {
  ALERTS_BUCKET,
  ALERTS_MAX_BYTES,
  ATTEMPT_INDEX_DATA_SUBJECT,
  ATTEMPT_INDEX_HEAD_SUBJECT,
  ATTEMPT_INDEX_STREAM,
  AUDIT_STREAM,
  AUDIT_SUBJECTS,
  attemptIndexMaxBytes,
  auditOutcomeSubject,
  auditRequestSubject,
  CONFIG_BUCKET,
  DEAD_STREAM,
  DEFAULT_TOPOLOGY,
  DELETIONS_BUCKET,
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  DISPATCHERS_BUCKET,
  deadSubject,
  deliveriesMaxAgeMs,
  deliveryPartition,
  deliverySubject,
  deliverySubjects,
  destinationConsumer,
  destinationOfSubject,
  destinationSubjects,
  EVENT_SUBJECT_PREFIX,
  EVENTS_STREAM,
  type EventType,
  ensureBucketLimits,
  ensureRouterConsumer,
  ensureTopology,
  eventSubject,
  type FullPolicy,
  ID_PATTERN,
  kvStream,
  LANE_CONSUMER_PREFIX,
  LANE_SUBJECT_PREFIX,
  LAST_DELIVERED_SUBJECT,
  LEGACY_CONSUMER_PREFIX,
  LOG_RECORDS_FILTER,
  laneConsumer,
  laneSubject,
  legacyDeliverySubject,
  legacyDestinationConsumer,
  OPERATOR_TARGET_PREFIX,
  ORDERED_STREAM,
  ORDERED_SUBJECT_PREFIX,
  objectChunkSubject,
  objectStream,
  orderedDestinationFilter,
  orderedDestinationOf,
  orderedPartitionFilter,
  orderedSubject,
  orderedSubjectsOf,
  PORTAL_LINKS_BUCKET,
  PORTAL_LINKS_MAX_AGE_MS,
  partitionConsumer,
  partitionCount,
  partitionFilter,
  partitionOf,
  partitionSubject,
  ROUTER_CONSUMER,
  type StreamLimit,
  safeMaxBytes,
  splitTarget,
  streamLimits,
  type TopologySettings,
  targetId,
  USER_SOURCES_BUCKET,
} from "./nats/topology.js";
export { liveCounter, liveGauge } from "./ops/live-metrics.js";
export {
  type OpsLimits,
  type OpsServer,
  type OpsServerOptions,
  type Readiness,
  splitHostPort,
  startOpsServer,
} from "./ops/ops-server.js";
export { stopOnSignals } from "./ops/signals.js";
export {
  hashPortalToken,
  isPortalLinkId,
  newPortalLinkId,
  newPortalToken,
  type PortalLinkRecord,
  PortalLinkStore,
  parsePortalToken,
  portalTokenMatches,
} from "./portal/portal-links.js";
export { type Envelope, openEnvelope, sealEnvelope } from "./secrets/envelope.js";
export {
  Keyring,
  newSecretKeyEntry,
  parseSecretKeys,
  SECRET_KEY_BYTES,
  type SecretKey,
} from "./secrets/keyring.js";
export {
  openDestination,
  type StoredDestination,
  sealDestination,
  sealedWith,
} from "./secrets/sealed-destination.js";
export { SecretsKeyError } from "./secrets/secrets-key-error.js";
export {
  extractTraceContext,
  grpcTraceContext,
  type HeaderGetter,
  injectTraceContext,
  type TraceContext,
} from "./tracing/propagation.js";
export {
  ATTR,
  endRequestSpan,
  natsTraceContext,
  type StepSpan,
  setRecording,
  startDeliverySpan,
  startPublishSpan,
  startRequestSpan,
  startRouteSpan,
} from "./tracing/spans.js";
export { startTracing, type Tracing, type TracingOptions } from "./tracing/start.js";
export { erasable, userHash } from "./users/user-hash.js";
export {
  MAX_USER_ID_LENGTH,
  USER_FORGOTTEN_SUBJECT,
  USER_SOURCES_STREAM,
  UserSourceIndex,
  type UserSourceIndexOptions,
  type UserSourceIndexStats,
  userKeyPrefix,
  userSourceKey,
} from "./users/user-source-index.js";
export { bodyObject, renderBody } from "./webhook/body.js";
export {
  compileExpression,
  EXPRESSION_TIMEOUT_MS,
  type Expression,
  ExpressionError,
  evaluateExpression,
} from "./webhook/expression.js";
export {
  batchKey,
  elementBytes,
  jsonArray,
  MAX_MAPPED_BODY_BYTES,
  type Prepared,
  prepareBatchRequests,
  prepareRequests,
  RenderError,
  renderElement,
  USER_AGENT,
  type WebhookIds,
  type WebhookRequest,
} from "./webhook/request.js";
export { filterExpressionPasses, filterListsOf, shapingProblems } from "./webhook/shaping.js";
export { NEXT_SIGNATURE_HEADER, signatureHeaders } from "./webhook/signing.js";
export { publishTestCall, TEST_CALL_HEADER } from "./webhook/test-call.js";
