import { DomainError } from "../errors.js";

interface NatsLikeError {
  code?: string;
  message?: string;
  api_error?: { code?: number; err_code?: number; description?: string };
}

/**
 * The JetStream API error codes Hookpost acts on (`err_code` of the API's answer; nats-server's
 * server/errors.json). The one place that knows them: callers ask the predicates below.
 */
export const JetStreamErrorCode = {
  /** JSClusterNotAvailErr: JetStream system temporarily unavailable. */
  TemporarilyUnavailable: 10008,
  /** JSClusterNotLeaderErr: JetStream cluster can not handle request (between leaders). */
  ClusterNotLeader: 10009,
  /** JSConsumerNameExistErr: consumer name already in use. */
  ConsumerNameInUse: 10013,
  /** JSConsumerNotFoundErr. */
  ConsumerNotFound: 10014,
  /** JSInsufficientResourcesErr. */
  InsufficientResources: 10023,
  /** JSNoMessageFoundErr: a direct or sequence get found no message. */
  NoMessageFound: 10037,
  /** JSStorageResourcesExceededErr: insufficient storage resources available. */
  InsufficientStorage: 10047,
  /** JSStreamMsgDeleteFailedF: a delete by sequence failed ("no message found" when already deleted). */
  MessageDeleteFailed: 10057,
  /** JSStreamNameExistErr: stream name already in use with a different configuration. */
  StreamNameInUse: 10058,
  /** JSStreamNotFoundErr. */
  StreamNotFound: 10059,
  /** JSStreamWrongLastSequenceErrF: a revision-checked write found another revision. */
  WrongLastSequence: 10071,
  /** JSStreamStoreFailedF: store failed (maximum bytes, messages or messages per subject exceeded). */
  StoreFailed: 10077,
  /** JSConsumerAlreadyExists: a create found the consumer with another configuration. */
  ConsumerAlreadyExists: 10105,
  /** JSConsumerExistingActiveErr / newer "consumer already exists" answers. */
  ConsumerExists: 10148,
} as const;

/** The JetStream API error code (`err_code`) of a failure, when JetStream answered with one. */
export function jetStreamErrorCode(err: unknown): number | undefined {
  return (err as NatsLikeError)?.api_error?.err_code;
}

function hasCode(err: unknown, ...codes: number[]): boolean {
  const code = jetStreamErrorCode(err);
  return code !== undefined && codes.includes(code);
}

/** How long a client refused for a full stream is told to wait (RetryInfo, Retry-After). */
export const STREAM_FULL_RETRY_AFTER_MS = 5_000;

/** The JetStream API description and client message of an error, for logs and answers. */
export function jetStreamErrorText(err: unknown): string {
  const e = err as NatsLikeError;
  return `${e?.api_error?.description ?? ""} ${e?.message ?? String(err)}`.trim();
}

/**
 * True when what was asked for is not there: the stream, the consumer, or the message (a get by
 * sequence or by subject). JetStream answers 404 with one of the codes; a direct get answers a
 * bare 404 status (no API error), which nats.js turns into the code "404".
 */
export function isNotFound(err: unknown): boolean {
  const { StreamNotFound, ConsumerNotFound, NoMessageFound } = JetStreamErrorCode;
  if (hasCode(err, StreamNotFound, ConsumerNotFound, NoMessageFound)) return true;
  const e = err as NatsLikeError;
  return e?.api_error === undefined && e?.code === "404";
}

/**
 * True when a delete by sequence found the message already gone (deleted by someone else, or
 * beyond the stream's last sequence): what the delete was for has happened.
 */
export function isAlreadyDeleted(err: unknown): boolean {
  if (isNotFound(err)) return true;
  if (!hasCode(err, JetStreamErrorCode.MessageDeleteFailed)) return false;
  const text = (err as NatsLikeError).api_error?.description ?? "";
  return /no message found|stream store eof/i.test(text);
}

/** True when a create found the stream or consumer already there (another replica made it). */
export function isAlreadyExists(err: unknown): boolean {
  const { StreamNameInUse, ConsumerNameInUse, ConsumerAlreadyExists, ConsumerExists } = JetStreamErrorCode;
  return hasCode(err, StreamNameInUse, ConsumerNameInUse, ConsumerAlreadyExists, ConsumerExists);
}

/** True when JetStream refused a write because the stream (or the server's storage) is full. */
export function isStreamFull(err: unknown): boolean {
  const { StoreFailed, InsufficientResources, InsufficientStorage } = JetStreamErrorCode;
  return (
    hasCode(err, StoreFailed, InsufficientResources, InsufficientStorage) ||
    // A pipelined publish's ack carries the description only when the server is older.
    (jetStreamErrorCode(err) === undefined &&
      /maximum (bytes|messages|messages per subject) exceeded|insufficient (storage )?resources/i.test(
        jetStreamErrorText(err),
      ))
  );
}

/**
 * 10071, "wrong last sequence": a revision-checked KV write (create, update) found the key at
 * another revision: it exists already, or changed since it was read.
 */
export function isWrongLastSequence(err: unknown): boolean {
  return hasCode(err, JetStreamErrorCode.WrongLastSequence);
}
/** "No responders" (503): nothing answers the subject yet (JetStream starting, an election under way). */
export function isNoResponders(err: unknown): boolean {
  const e = err as NatsLikeError;
  return e?.api_error === undefined && e?.code === "503";
}

/**
 * True when the same request (with the same message id) may well succeed shortly: nobody
 * answered yet, the answer did not come in time, the connection dropped, or the cluster is
 * between leaders. Never true for a full stream, nor for a connection being closed by us.
 */
export function isTransient(err: unknown): boolean {
  if (isStreamFull(err)) return false;
  const e = err as NatsLikeError;
  return (
    isNoResponders(err) ||
    e?.code === "TIMEOUT" ||
    e?.code === "DISCONNECT" ||
    hasCode(err, JetStreamErrorCode.TemporarilyUnavailable, JetStreamErrorCode.ClusterNotLeader) ||
    // Errors of the client itself (no API answer, so no code) while the cluster elects a leader.
    (jetStreamErrorCode(err) === undefined &&
      /temporarily unavailable|no (suitable )?leader|leader (not found|unavailable)/i.test(
        jetStreamErrorText(err),
      ))
  );
}

/**
 * A failure of JetStream (publish, object store, KV) as a domain error: FULL when the stream is
 * full, otherwise UNAVAILABLE (retrying is safe: every write of ours is idempotent). Errors
 * already classified (a DomainError, or an edge's own error) pass through unchanged.
 */
export function natsFailure(what: string, err: unknown): Error {
  if (err instanceof DomainError || (err instanceof Error && err.name === "HookpostError")) return err;
  const text = jetStreamErrorText(err);
  if (isStreamFull(err)) {
    return new DomainError("FULL", `${what}: the event stream is full (${text}); retry later`, {
      cause: err,
      retryAfterMs: STREAM_FULL_RETRY_AFTER_MS,
    });
  }
  return new DomainError("UNAVAILABLE", `${what}: JetStream is unavailable (${text}); retry later`, {
    cause: err,
  });
}
