import { Code } from "@hookpost/contract";

/**
 * Codes after which the same batch may succeed later: the server was unreachable or overloaded,
 * or the answer did not arrive in time (the batch may even have been stored: the retry keeps the
 * message ids, so the server drops the copies).
 */
const RETRYABLE: ReadonlySet<Code> = new Set([
  Code.UNAVAILABLE,
  Code.DEADLINE_EXCEEDED,
  Code.RESOURCE_EXHAUSTED,
]);

export function isRetryable(code: Code): boolean {
  return RETRYABLE.has(code);
}

/**
 * Delay before retry number `attempt` (0 for the first retry): exponential, capped, with "equal
 * jitter" (half fixed, half random) so that many clients that failed together do not retry together.
 */
export function backoffDelay(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random = Math.random,
): number {
  const exp = Math.min(maxMs, initialMs * 2 ** attempt);
  return Math.round(exp / 2 + (exp / 2) * random());
}
