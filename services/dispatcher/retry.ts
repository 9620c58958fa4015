import { formatDuration } from "@hookpost/contract";

export interface RetryPolicy {
  baseDelayMs: number;
  maxDelayMs: number;
  windowMs: number;
  /** A destination's own delays (the last repeats), instead of the doubling backoff. */
  delaysMs?: readonly number[] | undefined;
}

/**
 * The policy for one destination: its own schedule (admin API: within RETRY_WINDOW and
 * RETRY_MAX_DELAY; clamped here too, in case this replica runs with smaller bounds), else the
 * server's.
 */
export function policyFor(
  server: RetryPolicy,
  dest: { retry?: { windowMs?: number; delaysMs?: readonly number[] } },
): RetryPolicy {
  const r = dest.retry;
  if (!r) return server;
  return {
    ...server,
    windowMs: Math.min(server.windowMs, r.windowMs ?? server.windowMs),
    ...(r.delaysMs?.length ? { delaysMs: r.delaysMs.map((d) => Math.min(d, server.maxDelayMs)) } : {}),
  };
}

/**
 * Delay before attempt `attempt + 1`: base * 2^(attempt-1), capped, with "equal jitter" (a random
 * point in the upper half) so replicas retrying a recovered endpoint do not arrive in lockstep,
 * while the first retry still comes after about RETRY_BASE_DELAY.
 *
 * `attempt` is JetStream's delivery count, which also counts hand-backs (shutdown, a destination
 * paused mid-flight) and crashed replicas. With pure doubling the delay always stays about the time
 * already spent retrying, so it is also bounded by `elapsedMs + base`: a few extra deliveries
 * cannot push the next retry out to the cap.
 */
export function backoffMs(
  attempt: number,
  p: RetryPolicy,
  elapsedMs = Number.POSITIVE_INFINITY,
  random: () => number = Math.random,
): number {
  // A destination's schedule is exact (it is what its owner wrote): no jitter, no doubling.
  if (p.delaysMs && p.delaysMs.length > 0)
    return p.delaysMs[Math.min(Math.max(attempt - 1, 0), p.delaysMs.length - 1)]!;
  const doubled = p.baseDelayMs * 2 ** Math.min(Math.max(attempt - 1, 0), 52);
  const exp = Math.min(p.maxDelayMs, doubled, Math.max(0, elapsedMs) + p.baseDelayMs);
  return Math.round(exp / 2 + random() * (exp / 2));
}

/** Retry-After as seconds or an HTTP date, in ms from `now`; undefined when absent or unusable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

export type DeadCause = "not_retryable" | "window_exhausted";
export type Decision =
  | { action: "retry"; delayMs: number }
  | { action: "dead"; cause: DeadCause; reason: string };

/**
 * What to do after a failed attempt. The window runs from when the delivery was stored; a retry
 * that would start after it ends is not scheduled, the delivery is dead-lettered instead.
 */
export function decide(args: {
  attempt: number;
  retryable: boolean;
  retryAfterMs: number | undefined;
  firstTimeMs: number;
  nowMs: number;
  policy: RetryPolicy;
  random?: () => number;
}): Decision {
  const p = args.policy;
  if (!args.retryable) return { action: "dead", cause: "not_retryable", reason: "not retryable" };
  let delay = backoffMs(args.attempt, p, args.nowMs - args.firstTimeMs, args.random);
  if (args.retryAfterMs !== undefined) delay = Math.max(delay, Math.min(args.retryAfterMs, p.maxDelayMs));
  if (args.nowMs + delay > args.firstTimeMs + p.windowMs) {
    return {
      action: "dead",
      cause: "window_exhausted",
      reason: `retry window of ${formatDuration(p.windowMs)} exhausted`,
    };
  }
  return { action: "retry", delayMs: delay };
}

/**
 * The decision after an attempt whose URLs all failed: retryable when any of them may be, after
 * at least the longest Retry-After any of them asked for.
 */
export function decideAfterAttempt(
  outcomes: readonly { retryable: boolean; retryAfterMs?: number | undefined }[],
  args: { attempt: number; firstTimeMs: number; policy: RetryPolicy },
): Decision {
  const retryAfters = outcomes.map((o) => o.retryAfterMs).filter((v) => v !== undefined);
  return decide({
    ...args,
    retryable: outcomes.some((o) => o.retryable),
    retryAfterMs: retryAfters.length > 0 ? Math.max(...retryAfters) : undefined,
    nowMs: Date.now(),
  });
}
