/**
 * What went wrong in the core and the stores, in their own terms: no transport's status code.
 * The edges translate: gRPC and Connect in core/grpc/domain-status.ts, HTTP through the same
 * status (services/api/http/http-error.ts).
 *   NOT_FOUND    what was asked for is not stored
 *   ALREADY_EXISTS  a create found the id taken
 *   CONFLICT     a concurrent writer changed it first (a retry reads the new state)
 *   FULL         the stream or bucket is at its byte limit (retry later)
 *   UNAVAILABLE  JetStream did not answer (a retry is safe: every write is idempotent)
 *   INVALID      the input cannot be stored as it is
 *   CORRUPT      what is stored does not match its own checks
 */
export type DomainErrorCode =
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "CONFLICT"
  | "FULL"
  | "UNAVAILABLE"
  | "INVALID"
  | "CORRUPT";

export class DomainError extends Error {
  override readonly name: string = "DomainError";
  readonly code: DomainErrorCode;
  /** When a retry may succeed (a full stream frees up), if known. */
  readonly retryAfterMs: number | undefined;

  constructor(code: DomainErrorCode, message: string, options?: ErrorOptions & { retryAfterMs?: number }) {
    super(message, options);
    this.code = code;
    this.retryAfterMs = options?.retryAfterMs;
  }
}
