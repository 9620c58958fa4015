export type { DeleteDeps, PublishCall, SyncDeps, SyncOptions } from "./deps.js";
export { jetStreamPublisher } from "./publish.js";
export { snakeCase } from "./snake-case.js";
export { type AudienceChunk, type SyncAudienceResult, syncAudience } from "./sync-audience.js";
export {
  canonicalJson,
  type SyncComputedTraitResult,
  syncComputedTrait,
  type TraitChunk,
} from "./sync-computed-trait.js";
export { MAX_SYNC_NAME_LENGTH, MAX_SYNC_USER_ID_LENGTH, syncMessageId } from "./sync-engine.js";
