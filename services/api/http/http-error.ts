import { Code, HookpostError } from "@hookpost/contract";
import { STREAM_FULL_RETRY_AFTER_MS } from "@hookpost/core";

/** How long a client should wait before retrying when the error does not say (full stream / NATS down). */
const RETRY_AFTER_FULL_S = STREAM_FULL_RETRY_AFTER_MS / 1000;
const RETRY_AFTER_UNAVAILABLE_S = 2;

/** The HTTP answer of an error: status, extra headers, and the JSON body. */
export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: { code: string; message: string; violations: Array<{ field: string; description: string }> };
}

/** A transport-level refusal with its own status (413 body too large, 415, 405, 404). */
export class HttpStatusError extends HookpostError {
  readonly status: number;

  constructor(status: number, code: Code, message: string, field?: string) {
    super(code, message, field === undefined ? [] : [{ field, description: message }]);
    this.status = status;
  }
}

/** Maps the one error type (HookpostError) to the Segment-style answer. */
export function errorAnswer(err: HookpostError): ErrorAnswer {
  const headers: Record<string, string> = {};
  let status: number;
  if (err instanceof HttpStatusError) status = err.status;
  else {
    switch (err.code) {
      case Code.INVALID_ARGUMENT:
        status = 400;
        break;
      case Code.UNAUTHENTICATED:
        status = 401;
        headers["WWW-Authenticate"] = 'Basic realm="hookpost", charset="UTF-8"';
        break;
      case Code.RESOURCE_EXHAUSTED: {
        status = 429;
        const wait = String(retryAfterSeconds(err, RETRY_AFTER_FULL_S));
        headers["Retry-After"] = wait;
        // The same delay in seconds for analytics-next before 1.84, which reads only this header
        // (parseInt(value) * 1000 ms).
        headers["X-RateLimit-Reset"] = wait;
        break;
      }
      case Code.UNAVAILABLE:
        status = 503;
        headers["Retry-After"] = String(retryAfterSeconds(err, RETRY_AFTER_UNAVAILABLE_S));
        break;
      default:
        status = 500;
    }
  }
  return {
    status,
    headers,
    body: {
      code: err.codeName,
      message: err.message,
      violations: err.fieldViolations.map((v) => ({ field: v.field, description: v.description })),
    },
  };
}

/** The error's own delay (a quota knows when it frees up), in whole seconds (at least 1), else the default. */
function retryAfterSeconds(err: HookpostError, fallbackS: number): number {
  return err.retryAfterMs === undefined ? fallbackS : Math.max(1, Math.ceil(err.retryAfterMs / 1000));
}
