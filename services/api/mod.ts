/** The public entry point of @hookpost/api: what other packages may import. */
export { type AuditDeps, type AuditedCall, audited } from "./admin/audited.js";
export { type PageRequest, pageOf } from "./admin/paging.js";
export {
  inPortalScope,
  PORTAL_SCOPE,
  type PortalCaller,
  Scope,
  type ScopeRule,
  type ScopeTable,
} from "./admin/portal-scope.js";
export { tokenFingerprint } from "./auth.js";
export { encodeIds, type IngestDeps, ingestService } from "./calls/ingest-service.js";
export { defaultSourceQuota, type QuotaLimit, SourceQuota, type SourceQuotaSettings } from "./calls/quota.js";
export {
  DEFAULT_INGEST_ADDR,
  DEFAULT_INGEST_OPS_ADDR,
  DEFAULT_PUBLISH_TIMEOUT_MS,
  DEFAULT_STREAM_CHECK_MS,
  type IngestConfig,
  ingestConfigFrom,
  ingestConfigFromEnv,
} from "./config.js";
export { securityHeaders } from "./console/console-handler.js";
export { type DeleteUserResult, deleteUser, deletionMessageId } from "./deletion/delete-user.js";
export {
  type ConnectionGuardLimits,
  clientKey,
  guardConnections,
  type HttpCloseReason,
  type HttpConnectionStats,
} from "./http/connection-guard.js";
export { apiEndpoint } from "./http/settings-path.js";
export { type IngestHandle, type IngestOptions, startIngest } from "./ingest.js";
export type { DeleteDeps, PublishCall, SyncDeps, SyncOptions } from "./sync/deps.js";
export { jetStreamPublisher } from "./sync/publish.js";
export { snakeCase } from "./sync/snake-case.js";
export { type AudienceChunk, type SyncAudienceResult, syncAudience } from "./sync/sync-audience.js";
export {
  canonicalJson,
  MAX_TRAIT_VALUE_BYTES,
  type SyncComputedTraitResult,
  syncComputedTrait,
  type TraitChunk,
} from "./sync/sync-computed-trait.js";
export {
  applySync,
  cancelled,
  identifyJsonRenderer,
  MAX_SYNC_NAME_LENGTH,
  MAX_SYNC_USER_ID_LENGTH,
  nameAndKey,
  newRunBuilder,
  readSyncStream,
  type StreamReading,
  SYNC_TEMP_PREFIX,
  type SyncCounts,
  type SyncSubject,
  syncMessageId,
  syncMessageIds,
  userIdProblem,
  Violations,
  withTempDir,
} from "./sync/sync-engine.js";
