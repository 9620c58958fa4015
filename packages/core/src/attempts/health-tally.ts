import { getOrInsert } from "../get-or-insert.js";
import type { LogRecord } from "./record.js";

const MINUTE = 60_000;
/** Retry entries one summary carries per destination at most (the fold keeps 10 000). */
const MAX_RETRYING_PER_SUMMARY = 1000;

/**
 * What one dispatcher replica's records changed in a destination's health during one window:
 * counts to add, the newest success and failure, the run of failures since the window's last
 * success, and which messages started or stopped waiting for a retry. JSON-safe.
 */
export interface DestinationDelta {
  /** Minute start (ms) -> [delivered, failed]. */
  minutes?: Record<string, [number, number]>;
  /** Second -> calls routed to the destination. */
  incoming?: Record<string, number>;
  /** Second -> deliveries. */
  delivered?: Record<string, number>;
  lastSuccessMs?: number;
  lastFailure?: { ms: number; reason: string };
  /** Failures after the window's last success (every failure of the window when `reset` is unset). */
  failures?: number;
  /** The window had a success: consecutive failures count from `failures` again. */
  reset?: true;
  /** Message id -> next attempt (ms); 0 when it no longer waits (delivered, dead, or not retried). */
  retrying?: Record<string, number>;
  /** The replica's circuit breaker for the destination, as of its latest change in the window. */
  breaker?: BreakerReport;
  /** Dead letters written in the window (operational webhooks aggregate them), and the last one's reason. */
  dead?: number;
  lastDeadReason?: string;
}

export type BreakerState = "closed" | "open" | "half_open";

/**
 * One replica's circuit breaker of one destination (the dispatcher's breaker view): open holds
 * the destination's calls back until `until` (ms), then one probe may go (half-open).
 */
export interface BreakerReport {
  state: BreakerState;
  /** Open: when the next probe may go (ms since the epoch). */
  until?: number;
  /** Consecutive failed attempts the replica saw. */
  failures: number;
}

/** One replica's window of health, stored on the attempt log (`hookpost.health.<replica>`). */
export interface HealthSummary {
  kind: "health";
  replica: string;
  /** End of the window, ISO 8601. */
  time: string;
  destinations: Record<string, DestinationDelta>;
  /** The replica is shutting down: its breaker reports no longer hold anything back. */
  leaving?: true;
}

/**
 * Folds the records a dispatcher replica writes into per-destination deltas, taken (and reset)
 * once per window. Ingest merges the summaries instead of reading every record: one small
 * message per replica and second, however many deliveries, and an hour of health is an hour of
 * summaries to read at start instead of every attempt of the hour.
 */
export class HealthTally {
  #deltas = new Map<string, DestinationDelta>();
  /** Entries in each delta's `retrying` (counted, not re-counted per record). */
  #retryEntries = new Map<DestinationDelta, number>();

  get empty(): boolean {
    return this.#deltas.size === 0;
  }

  fold(r: LogRecord): void {
    if (r.kind === "routed") {
      if (r.filtered) return;
      const sec = String(Math.floor(Date.parse(r.time) / 1000));
      for (const id of r.destinations) {
        const d = this.#get(id);
        d.incoming ??= {};
        d.incoming[sec] = (d.incoming[sec] ?? 0) + 1;
      }
      return;
    }
    const d = this.#get(r.destinationId);
    if (r.kind === "dead") {
      this.#retry(d, r.messageId, 0);
      d.dead = (d.dead ?? 0) + 1;
      d.lastDeadReason = r.reason.slice(0, 300);
      return;
    }
    const at = Date.parse(r.startTime) + r.durationMs;
    const minute = String(Math.floor(at / MINUTE) * MINUTE);
    d.minutes ??= {};
    d.minutes[minute] ??= [0, 0];
    const counts = d.minutes[minute];
    if (r.outcome === "success") {
      counts[0]++;
      const sec = String(Math.floor(at / 1000));
      d.delivered ??= {};
      d.delivered[sec] = (d.delivered[sec] ?? 0) + 1;
      d.lastSuccessMs = Math.max(d.lastSuccessMs ?? 0, at);
      d.reset = true;
      d.failures = 0;
      // A first attempt never waited for a retry: most deliveries add nothing here.
      if (r.attemptNumber > 1 || d.retrying?.[r.messageId]) this.#retry(d, r.messageId, 0);
    } else {
      counts[1]++;
      if (!d.lastFailure || at >= d.lastFailure.ms) d.lastFailure = { ms: at, reason: r.reason };
      d.failures = (d.failures ?? 0) + 1;
      if (r.nextAttemptTime) this.#retry(d, r.messageId, Date.parse(r.nextAttemptTime));
      else if (r.attemptNumber > 1 || d.retrying?.[r.messageId]) this.#retry(d, r.messageId, 0);
    }
  }

  /** A breaker change (or a re-report of one still open): the latest of the window is kept. */
  breaker(destinationId: string, report: BreakerReport): void {
    this.#get(destinationId).breaker = report;
  }

  /** The window's summary (undefined when nothing happened), and a fresh window. */
  take(replica: string, nowMs = Date.now(), leaving = false): HealthSummary | undefined {
    if (this.#deltas.size === 0 && !leaving) return undefined;
    const destinations = Object.fromEntries(this.#deltas);
    this.#deltas = new Map();
    this.#retryEntries = new Map();
    const time = new Date(nowMs).toISOString();
    return { kind: "health", replica, time, destinations, ...(leaving ? { leaving: true as const } : {}) };
  }

  #retry(d: DestinationDelta, messageId: string, nextMs: number): void {
    // No prototype: a message id may be "__proto__" or "constructor".
    d.retrying ??= Object.create(null) as Record<string, number>;
    if (!Object.hasOwn(d.retrying, messageId)) {
      const n = this.#retryEntries.get(d) ?? 0;
      // Past the cap only removals are kept: a missed "waiting" entry only hides a retry time.
      if (nextMs !== 0 && n >= MAX_RETRYING_PER_SUMMARY) return;
      this.#retryEntries.set(d, n + 1);
    }
    d.retrying[messageId] = nextMs;
  }

  #get(id: string): DestinationDelta {
    return getOrInsert(this.#deltas, id, () => ({}));
  }
}
