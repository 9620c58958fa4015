import { Code, HookpostError } from "@hookpost/contract";
import { DomainError, type DomainErrorCode } from "../errors.js";

/** The one map from the core's errors to gRPC (and Connect, which numbers its codes alike). */
const STATUS: Record<DomainErrorCode, Code> = {
  NOT_FOUND: Code.NOT_FOUND,
  ALREADY_EXISTS: Code.ALREADY_EXISTS,
  CONFLICT: Code.ABORTED,
  FULL: Code.RESOURCE_EXHAUSTED,
  UNAVAILABLE: Code.UNAVAILABLE,
  INVALID: Code.INVALID_ARGUMENT,
  CORRUPT: Code.INTERNAL,
};

/** The gRPC status of a domain error. */
export function domainStatus(err: DomainError): Code {
  return STATUS[err.code];
}

/**
 * What a client sees of an error: a HookpostError as it is, a DomainError with its status;
 * undefined for anything else (the edge answers INTERNAL and logs it).
 */
export function toHookpostError(err: unknown): HookpostError | undefined {
  if (err instanceof HookpostError) return err;
  if (!(err instanceof DomainError)) return undefined;
  return new HookpostError(domainStatus(err), err.message, [], {
    cause: err,
    ...(err.retryAfterMs !== undefined && { retryAfterMs: err.retryAfterMs }),
  });
}
