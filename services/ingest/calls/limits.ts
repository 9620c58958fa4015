/** One call, encoded as protobuf, is at most this large (SPEC section 3). */
export const MAX_CALL_BYTES = 32 * 1024;
/** A Batch request, encoded, is at most this large. */
export const MAX_BATCH_BYTES = 500 * 1024;
/**
 * The gRPC transport accepts requests up to this size, well above MAX_BATCH_BYTES, so that
 * an oversized request gets our readable INVALID_ARGUMENT rather than the transport's
 * RESOURCE_EXHAUSTED (which clients retry).
 */
export const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
/** A message id is at most this many characters. */
export const MAX_MESSAGE_ID_CHARS = 100;
/**
 * Objects (context, traits, properties) nest at most this deep. (protobuf-es refuses to
 * decode beyond about 50 levels anyway; that answers INVALID_ARGUMENT too.)
 */
export const MAX_OBJECT_DEPTH = 32;
/** At most this many field violations are reported for one request. */
export const MAX_REPORTED_VIOLATIONS = 20;
/** Calls of one Batch published to JetStream at the same time. */
export const PUBLISH_CONCURRENCY = 256;
