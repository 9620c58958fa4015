/** The limits of the ingest contract (SPEC section 3), the same for every transport. */

/** One call is at most this large: its protobuf encoding (gRPC) or its JSON as sent (HTTP). */
export const MAX_CALL_BYTES = 32 * 1024;
/** A batch is at most this large: the BatchRequest bytes (gRPC) or the JSON body (HTTP). */
export const MAX_BATCH_BYTES = 500 * 1024;
/** Default cap on the calls of one batch (Segment's figure); `MAX_BATCH_CALLS` changes it. */
export const DEFAULT_MAX_BATCH_CALLS = 2500;
/** A message id is at most this many characters (all ASCII, so also bytes). */
export const MAX_MESSAGE_ID_CHARS = 100;
/** Objects (context, traits, properties) nest at most this deep. */
export const MAX_OBJECT_DEPTH = 32;
/** At most this many field violations are reported for one request. */
export const MAX_REPORTED_VIOLATIONS = 20;
/**
 * ReplayDeadLetters takes at most this many sequences (a page of ListDeadLetters at its largest):
 * each is looked up before anything is replayed. More: replay by time range, or all.
 */
export const MAX_REPLAY_SEQUENCES = 1000;
