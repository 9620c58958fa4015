import { MAX_URLS } from "@hookpost/contract";
import type { NatsConnection } from "nats";
import { getOrInsert } from "../get-or-insert.js";
import type { Logger } from "../log/logger.js";
import { StreamFeed } from "../nats/stream-feed.js";
import { targetId } from "../nats/topology.js";
import type { BreakerReport, BreakerState, HealthSummary } from "./health-tally.js";
import { ATTEMPTS_STREAM, healthSubject } from "./record.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Messages waiting for a retry remembered per destination (the earliest next retry is shown). */
const MAX_RETRYING = 10_000;
/** A retry this far past due is forgotten rather than shown as the next one. */
const OVERDUE_MS = MINUTE;
/**
 * A breaker report not refreshed for this long (publisher.ts refreshes every minute) whose cool-down
 * is over comes from a replica that died without saying so: it is dropped.
 */
export const BREAKER_STALE_MS = 3 * MINUTE;
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

/** A destination's breaker over every replica: open when any replica holds its calls back. */
export interface BreakerFigures {
  /** open: some replica's cool-down runs; half_open: a replica's is over and its next call probes. */
  state: BreakerState;
  /** Open: the latest end of a cool-down over the replicas (ms). */
  untilMs?: number;
  /** Replicas whose breaker is not closed. */
  replicas: number;
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
  breaker: BreakerFigures;
}

/**
 * Delivery health per destination, merged in memory from the dispatcher replicas' health
 * summaries (packages/core/src/attempts/health-tally.ts): a stream feed (packages/core/src/nats/stream-feed.ts) over
 * `hookpost.health.>` reads the last hour at start, then follows new summaries. One summary per
 * replica and second whatever the traffic, so following it costs next to nothing, and state is
 * bounded by the hour's minutes, the minute's seconds and MAX_RETRYING: answering a health query
 * never scans the stream.
 */
export class HealthAggregate {
  readonly #stats = new Map<string, DestinationStats>();
  /** Destination -> replica -> its latest breaker report that is not closed, and when (summary time, ms). */
  readonly #breakers = new Map<string, Map<string, { report: BreakerReport; atMs: number }>>();
  readonly #feed: StreamFeed;

  constructor(nc: NatsConnection, logger: Logger) {
    this.#feed = healthSummaryFeed({
      nc,
      logger,
      startTime: () => new Date(Date.now() - HOUR),
      onSummary: (s) => this.merge(s),
    });
  }

  start(): void {
    this.#feed.start();
  }

  close(): void {
    this.#feed.close();
  }

  /** Merges one replica's window in (public for tests of the arithmetic). */
  merge(summary: HealthSummary): void {
    const now = Date.parse(summary.time);
    for (const [id, d] of Object.entries(summary.destinations)) {
      if (d.breaker) this.#breaker(id, summary.replica, d.breaker, now);
      const s = this.#get(id);
      for (const [minute, [delivered, failed]] of Object.entries(d.minutes ?? {})) {
        const counts = s.minutes.get(Number(minute)) ?? { delivered: 0, failed: 0 };
        counts.delivered += delivered;
        counts.failed += failed;
        s.minutes.set(Number(minute), counts);
      }
      for (const [sec, n] of Object.entries(d.incoming ?? {})) add(s.incoming, Number(sec), n);
      for (const [sec, n] of Object.entries(d.delivered ?? {})) add(s.deliveredBySecond, Number(sec), n);
      if (d.lastSuccessMs !== undefined) s.lastSuccessMs = Math.max(s.lastSuccessMs ?? 0, d.lastSuccessMs);
      if (d.lastFailure && (!s.lastFailure || d.lastFailure.ms >= s.lastFailure.ms))
        s.lastFailure = d.lastFailure;
      if (d.reset) s.consecutiveFailures = d.failures ?? 0;
      else s.consecutiveFailures += d.failures ?? 0;
      for (const [messageId, next] of Object.entries(d.retrying ?? {})) {
        if (next === 0) s.retrying.delete(messageId);
        else if (s.retrying.has(messageId) || s.retrying.size < MAX_RETRYING) s.retrying.set(messageId, next);
      }
      // Once a second per destination: a prune walks every minute and second kept.
      if (now - s.prunedAt >= 1000) {
        s.prunedAt = now;
        prune(s, now);
      }
    }
    // After the window's own reports: they were made before the replica left.
    if (summary.leaving) {
      for (const [id, byReplica] of this.#breakers) {
        byReplica.delete(summary.replica);
        if (byReplica.size === 0) this.#breakers.delete(id);
      }
    }
  }

  #breaker(id: string, replica: string, report: BreakerReport, atMs: number): void {
    let byReplica = this.#breakers.get(id);
    if (report.state === "closed") {
      byReplica?.delete(replica);
      if (byReplica?.size === 0) this.#breakers.delete(id);
      return;
    }
    if (!byReplica) {
      byReplica = new Map();
      this.#breakers.set(id, byReplica);
    }
    byReplica.set(replica, { report, atMs });
  }

  /** The destination's breaker over the replicas whose reports still count at `nowMs`. */
  #breakerFigures(id: string, nowMs: number): BreakerFigures {
    const byReplica = this.#breakers.get(id);
    let untilMs: number | undefined;
    let replicas = 0;
    for (const [replica, { report, atMs }] of byReplica ?? []) {
      const over = report.until === undefined || report.until <= nowMs;
      if (over && nowMs - atMs > BREAKER_STALE_MS) {
        byReplica!.delete(replica);
        continue;
      }
      replicas++;
      if (report.state === "open" && !over) untilMs = Math.max(untilMs ?? 0, report.until!);
    }
    if (byReplica?.size === 0) this.#breakers.delete(id);
    if (untilMs !== undefined) return { state: "open", untilMs, replicas };
    return { state: replicas > 0 ? "half_open" : "closed", replicas };
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
    for (const [messageId, t] of s.retrying) {
      // Long overdue: its outcome came from another replica in a summary merged before this
      // one's "will retry" (a window apart), or the destination is paused. Not a next retry.
      if (t < nowMs - OVERDUE_MS) s.retrying.delete(messageId);
      else if (nextRetryMs === undefined || t < nextRetryMs) nextRetryMs = t;
    }
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
      breaker: this.#worstBreaker(destinationId, nowMs),
    };
  }

  /**
   * The destination's breaker, or for a FAN_OUT one the least hopeful of its URLs' (each URL is a
   * delivery target with a breaker of its own, docs/design/shaping.md 7.2).
   */
  #worstBreaker(id: string, nowMs: number): BreakerFigures {
    let worst = this.#breakerFigures(id, nowMs);
    const rank = { closed: 0, half_open: 1, open: 2 } as const;
    for (let i = 0; i < MAX_URLS; i++) {
      const t = targetId(id, i);
      if (!this.#breakers.has(t)) continue;
      const f = this.#breakerFigures(t, nowMs);
      if (
        rank[f.state] > rank[worst.state] ||
        (f.state === "open" && (f.untilMs ?? 0) > (worst.untilMs ?? 0))
      )
        worst = f;
    }
    return worst;
  }

  /** A deleted destination's figures go with it. */
  forget(destinationId: string): void {
    this.#stats.delete(destinationId);
    this.#breakers.delete(destinationId);
    for (let i = 0; i < MAX_URLS; i++) this.#breakers.delete(targetId(destinationId, i));
  }

  #get(id: string): DestinationStats {
    return getOrInsert(this.#stats, id, () => new DestinationStats());
  }
}

/**
 * Follows every dispatcher replica's health summaries (`hookpost.health.*`) from `startTime` on:
 * what ingest's destination health and the operational webhooks' watcher fold.
 */
export function healthSummaryFeed(o: {
  nc: NatsConnection;
  logger: Logger;
  startTime: () => Date;
  onSummary: (s: HealthSummary) => void;
  heartbeatMs?: number;
}): StreamFeed {
  return new StreamFeed({
    nc: o.nc,
    stream: ATTEMPTS_STREAM,
    filterSubject: healthSubject("*"),
    startTime: o.startTime,
    ...(o.heartbeatMs === undefined ? {} : { heartbeatMs: o.heartbeatMs }),
    onMessage: (data) => {
      try {
        const r = JSON.parse(decoder.decode(data)) as HealthSummary;
        if (r.kind === "health") o.onSummary(r);
      } catch {
        // Not ours to judge: an unreadable summary is skipped.
      }
    },
    logger: o.logger,
  });
}

function add(m: Map<number, number>, key: number, n: number): void {
  m.set(key, (m.get(key) ?? 0) + n);
}

function prune(s: DestinationStats, nowMs: number): void {
  const oldestMinute = Math.floor(nowMs / MINUTE) * MINUTE - 59 * MINUTE;
  for (const k of s.minutes.keys()) if (k < oldestMinute) s.minutes.delete(k);
  const oldestSecond = Math.floor(nowMs / 1000) - 60;
  for (const m of [s.incoming, s.deliveredBySecond])
    for (const k of m.keys()) if (k <= oldestSecond) m.delete(k);
}
