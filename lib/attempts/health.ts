import type { NatsConnection } from "nats";
import type { Logger } from "../log/logger.js";
import { StreamFeed } from "../nats/stream-feed.js";
import { ATTEMPTS_STREAM, type LogRecord } from "./record.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Messages waiting for a retry remembered per destination (the earliest next retry is shown). */
const MAX_RETRYING = 10_000;
const decoder = new TextDecoder();

interface Counts {
  delivered: number;
  failed: number;
}

class DestinationStats {
  /** Minute start (ms) -> counts, the last hour. */
  readonly minutes = new Map<number, Counts>();
  /** Second (s) -> calls routed here / delivered, the last minute. */
  readonly incoming = new Map<number, number>();
  readonly deliveredBySecond = new Map<number, number>();
  lastSuccessMs: number | undefined;
  lastFailure: { ms: number; reason: string } | undefined;
  consecutiveFailures = 0;
  /** When prune() last ran for this destination (record time, ms). */
  prunedAt = 0;
  /** Message id -> next attempt (ms), while the last attempt was a failure that will be retried. */
  readonly retrying = new Map<string, number>();
}

export interface HealthFigures {
  deliveries5m: number;
  failures5m: number;
  deliveries1h: number;
  failures1h: number;
  successRate1h: number;
  lastSuccessMs?: number;
  lastFailureMs?: number;
  lastFailureReason: string;
  consecutiveFailures: number;
  nextRetryMs?: number;
  incomingPerSecond: number;
  deliveredPerSecond: number;
  /** The last 60 minutes, oldest first. */
  minutes: { startMs: number; delivered: number; failed: number }[];
}

/**
 * Delivery health per destination, folded in memory from the attempt log: a stream feed
 * (lib/nats/stream-feed.ts) reads the last hour at start, then follows new records. Work per record is constant and state
 * is bounded by the hour's minutes, the minute's seconds and MAX_RETRYING, so answering a health
 * query never scans the stream.
 */
export class HealthAggregate {
  readonly #stats = new Map<string, DestinationStats>();
  readonly #feed: StreamFeed;

  constructor(nc: NatsConnection, logger: Logger) {
    this.#feed = new StreamFeed({
      nc,
      stream: ATTEMPTS_STREAM,
      startTime: () => new Date(Date.now() - HOUR),
      onMessage: (data) => {
        try {
          this.fold(JSON.parse(decoder.decode(data)) as LogRecord);
        } catch {
          // Not ours to judge: an unreadable record is skipped.
        }
      },
      logger,
    });
  }

  start(): void {
    this.#feed.start();
  }

  close(): void {
    this.#feed.close();
  }

  /** The stream sequence folded in so far (tests wait on it). */
  get lastSequence(): number {
    return this.#feed.lastSequence;
  }

  /** Folds one record in (public for tests of the arithmetic). */
  fold(r: LogRecord): void {
    if (r.kind === "routed") {
      if (r.filtered) return;
      const sec = Math.floor(Date.parse(r.time) / 1000);
      for (const id of r.destinations) bump(this.#get(id).incoming, sec);
      return;
    }
    const s = this.#get(r.destinationId);
    if (r.kind === "dead") {
      s.retrying.delete(r.messageId);
      return;
    }
    const at = Date.parse(r.startTime) + r.durationMs;
    const minute = Math.floor(at / MINUTE) * MINUTE;
    const counts = s.minutes.get(minute) ?? { delivered: 0, failed: 0 };
    s.minutes.set(minute, counts);
    if (r.outcome === "success") {
      counts.delivered++;
      bump(s.deliveredBySecond, Math.floor(at / 1000));
      s.lastSuccessMs = Math.max(s.lastSuccessMs ?? 0, at);
      s.consecutiveFailures = 0;
      s.retrying.delete(r.messageId);
    } else {
      counts.failed++;
      if (!s.lastFailure || at >= s.lastFailure.ms) s.lastFailure = { ms: at, reason: r.reason };
      s.consecutiveFailures++;
      s.retrying.delete(r.messageId);
      if (r.nextAttemptTime && s.retrying.size < MAX_RETRYING) {
        s.retrying.set(r.messageId, Date.parse(r.nextAttemptTime));
      }
    }
    // Once a second per destination: a prune walks every minute and second kept.
    if (at - s.prunedAt >= 1000) {
      s.prunedAt = at;
      prune(s, at);
    }
  }

  figures(destinationId: string, nowMs = Date.now()): HealthFigures {
    const s = this.#stats.get(destinationId) ?? new DestinationStats();
    prune(s, nowMs);
    const thisMinute = Math.floor(nowMs / MINUTE) * MINUTE;
    const minutes: HealthFigures["minutes"] = [];
    for (let i = 59; i >= 0; i--) {
      const startMs = thisMinute - i * MINUTE;
      const c = s.minutes.get(startMs);
      minutes.push({ startMs, delivered: c?.delivered ?? 0, failed: c?.failed ?? 0 });
    }
    const sum = (list: typeof minutes) =>
      list.reduce((a, m) => ({ delivered: a.delivered + m.delivered, failed: a.failed + m.failed }), {
        delivered: 0,
        failed: 0,
      });
    const hour = sum(minutes);
    const five = sum(minutes.slice(-5));
    const lastMinute = (m: Map<number, number>) => {
      const from = Math.floor(nowMs / 1000) - 60;
      let n = 0;
      for (const [sec, c] of m) if (sec > from) n += c;
      return n / 60;
    };
    let nextRetryMs: number | undefined;
    for (const t of s.retrying.values()) if (nextRetryMs === undefined || t < nextRetryMs) nextRetryMs = t;
    const total = hour.delivered + hour.failed;
    return {
      deliveries5m: five.delivered,
      failures5m: five.failed,
      deliveries1h: hour.delivered,
      failures1h: hour.failed,
      successRate1h: total === 0 ? 0 : hour.delivered / total,
      ...(s.lastSuccessMs === undefined ? {} : { lastSuccessMs: s.lastSuccessMs }),
      ...(s.lastFailure === undefined ? {} : { lastFailureMs: s.lastFailure.ms }),
      lastFailureReason: s.lastFailure?.reason ?? "",
      consecutiveFailures: s.consecutiveFailures,
      ...(nextRetryMs === undefined ? {} : { nextRetryMs }),
      incomingPerSecond: lastMinute(s.incoming),
      deliveredPerSecond: lastMinute(s.deliveredBySecond),
      minutes,
    };
  }

  /** A deleted destination's figures go with it. */
  forget(destinationId: string): void {
    this.#stats.delete(destinationId);
  }

  #get(id: string): DestinationStats {
    let s = this.#stats.get(id);
    if (!s) {
      s = new DestinationStats();
      this.#stats.set(id, s);
    }
    return s;
  }
}

function bump(m: Map<number, number>, key: number): void {
  m.set(key, (m.get(key) ?? 0) + 1);
}

function prune(s: DestinationStats, nowMs: number): void {
  const oldestMinute = Math.floor(nowMs / MINUTE) * MINUTE - 59 * MINUTE;
  for (const k of s.minutes.keys()) if (k < oldestMinute) s.minutes.delete(k);
  const oldestSecond = Math.floor(nowMs / 1000) - 60;
  for (const m of [s.incoming, s.deliveredBySecond])
    for (const k of m.keys()) if (k <= oldestSecond) m.delete(k);
}
