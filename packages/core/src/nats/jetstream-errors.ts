import { Code, HookpostError } from "@hookpost/contract";

interface NatsLikeError {
  code?: string;
  message?: string;
  api_error?: { err_code?: number; description?: string };
}

/** How long a client refused for a full stream is told to wait (RetryInfo, Retry-After). */
export const STREAM_FULL_RETRY_AFTER_MS = 5_000;

/** The JetStream API description and client message of an error, for logs and answers. */
export function jetStreamErrorText(err: unknown): string {
  const e = err as NatsLikeError;
  return `${e?.api_error?.description ?? ""} ${e?.message ?? String(err)}`.trim();
}

/** True when JetStream refused a write because the stream (or the server's storage) is full. */
export function isStreamFull(err: unknown): boolean {
  const code = (err as NatsLikeError)?.api_error?.err_code;
  return (
    code === 10077 || // store failed: maximum bytes/messages exceeded
    code === 10023 || // insufficient resources
    code === 10047 || // insufficient storage resources
    /maximum (bytes|messages|messages per subject) exceeded|insufficient (storage )?resources/i.test(
      jetStreamErrorText(err),
    )
  );
}

/**
 * 10071, "wrong last sequence": a revision-checked KV write (create, update) found the key at
 * another revision: it exists already, or changed since it was read.
 */
export function isWrongLastSequence(err: unknown): boolean {
  return (err as NatsLikeError)?.api_error?.err_code === 10071;
}

/** "No responders" (503): nothing answers the subject yet (JetStream starting, an election under way). */
export function isNoResponders(err: unknown): boolean {
  const e = err as NatsLikeError;
  return e?.api_error === undefined && (e?.code === "503" || /no responders/i.test(jetStreamErrorText(err)));
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
    e?.api_error?.err_code === 10008 || // JetStream system temporarily unavailable
    /temporarily unavailable|no (suitable )?leader|leader (not found|unavailable)/i.test(
      jetStreamErrorText(err),
    )
  );
}

/**
 * Maps a failure of JetStream (publish, object store, KV) to what a gRPC client should see:
 * RESOURCE_EXHAUSTED when the stream is full, otherwise UNAVAILABLE (retrying is safe: every
 * write of ours is idempotent). HookpostErrors pass through unchanged.
 */
export function natsFailure(what: string, err: unknown): HookpostError {
  if (err instanceof HookpostError) return err;
  const text = jetStreamErrorText(err);
  if (isStreamFull(err)) {
    return new HookpostError(
      Code.RESOURCE_EXHAUSTED,
      `${what}: the event stream is full (${text}); retry later`,
      [],
      { cause: err, retryAfterMs: STREAM_FULL_RETRY_AFTER_MS },
    );
  }
  return new HookpostError(Code.UNAVAILABLE, `${what}: JetStream is unavailable (${text}); retry later`, [], {
    cause: err,
  });
}
