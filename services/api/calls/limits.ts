/*
 * Limits of the gRPC transport. The contract's limits (call and batch sizes, calls per batch,
 * message ids) live in packages/contract/src/limits.ts.
 */

/**
 * The gRPC transport accepts requests up to this size, well above MAX_BATCH_BYTES, so that
 * an oversized request gets our readable INVALID_ARGUMENT rather than the transport's
 * RESOURCE_EXHAUSTED (which clients retry).
 */
export const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
/** Calls of one batch published to JetStream at the same time. */
export const PUBLISH_CONCURRENCY = 256;
