import type { HealthSummary, Logger } from "@hookpost/core";
import { healthSummaryFeed, isOperatorTarget, type StreamFeed } from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { HealthFacts } from "./events.js";

interface Counts {
  ok: number;
  failed: number;
}

interface DestinationWindow {
  /** Bucket start (ms) -> attempts that succeeded and failed. */
  buckets: Map<number, Counts>;
  lastFailure?: { ms: number; reason: string };
}

export interface DeadCount {
  count: number;
  lastReason: string;
}

/** The success-rate window is counted in this many buckets: memory per destination stays small. */
const BUCKETS = 10;

/**
 * What the replica that watches destinations knows of their delivery: a sliding window of
 * attempts (succeeded, failed) per destination, and dead letters per tumbling window, both folded
 * from the health summaries every dispatcher replica writes once a second (core's
 * attempts/health-tally.ts), the same feed ingest reads for destination health. Following it
 * costs one small message per replica and second whatever the traffic; taking over reads the last
 * windows again, so a new watcher knows what the previous one knew.
 */
export class AlertFeed {
  readonly #feed: StreamFeed;
  readonly #windowMs: number;
  readonly #bucketMs: number;
  readonly #deadWindowMs: number;
  readonly #destinations = new Map<string, DestinationWindow>();
  /** Dead-letter window index -> destination -> count. */
  readonly #dead = new Map<number, Map<string, DeadCount>>();
  /** Summaries are read from here on: windows that start earlier are not fully counted. */
  readonly coveredFromMs: number;

  constructor(
    nc: NatsConnection,
    logger: Logger,
    o: { windowMs: number; deadWindowMs: number; nowMs?: number },
  ) {
    this.#windowMs = o.windowMs;
    this.#bucketMs = Math.max(1000, Math.floor(o.windowMs / BUCKETS));
    this.#deadWindowMs = o.deadWindowMs;
    this.coveredFromMs = (o.nowMs ?? Date.now()) - Math.max(o.windowMs, 2 * o.deadWindowMs);
    this.#feed = healthSummaryFeed({
      nc,
      logger,
      startTime: () => new Date(this.coveredFromMs),
      // Takeover waits for the feed to catch up: an idle one says so at its first heartbeat.
      heartbeatMs: 1000,
      onSummary: (s) => this.merge(s),
    });
  }

  start(): void {
    this.#feed.start();
  }

  close(): void {
    this.#feed.close();
  }

  /** Everything stored when the feed started has been read: figures are complete. */
  get ready(): boolean {
    return this.#feed.caughtUp;
  }

  /** Folds one replica's second in (public for tests of the arithmetic). */
  merge(summary: HealthSummary): void {
    const at = Date.parse(summary.time);
    if (!Number.isFinite(at)) return;
    const bucket = Math.floor(at / this.#bucketMs) * this.#bucketMs;
    const deadIndex = Math.floor(at / this.#deadWindowMs);
    for (const [id, d] of Object.entries(summary.destinations)) {
      // Operator webhooks are not watched: an alert about alerts would loop.
      if (isOperatorTarget(id)) continue;
      let ok = 0;
      let failed = 0;
      for (const [delivered, failures] of Object.values(d.minutes ?? {})) {
        ok += delivered;
        failed += failures;
      }
      if (ok + failed > 0 || d.lastFailure) {
        let w = this.#destinations.get(id);
        if (!w) {
          w = { buckets: new Map() };
          this.#destinations.set(id, w);
        }
        const c = w.buckets.get(bucket) ?? { ok: 0, failed: 0 };
        c.ok += ok;
        c.failed += failed;
        w.buckets.set(bucket, c);
        if (d.lastFailure && (!w.lastFailure || d.lastFailure.ms >= w.lastFailure.ms))
          w.lastFailure = d.lastFailure;
      }
      if (d.dead) {
        let byDest = this.#dead.get(deadIndex);
        if (!byDest) {
          byDest = new Map();
          this.#dead.set(deadIndex, byDest);
        }
        const c = byDest.get(id) ?? { count: 0, lastReason: "" };
        c.count += d.dead;
        if (d.lastDeadReason) c.lastReason = d.lastDeadReason;
        byDest.set(id, c);
      }
    }
  }

  /** Attempts over the window ending at `nowMs`. */
  health(id: string, nowMs: number): HealthFacts {
    const w = this.#destinations.get(id);
    let ok = 0;
    let failed = 0;
    const from = nowMs - this.#windowMs;
    for (const [start, c] of w?.buckets ?? []) {
      if (start + this.#bucketMs <= from) {
        w!.buckets.delete(start);
        continue;
      }
      ok += c.ok;
      failed += c.failed;
    }
    if (w && w.buckets.size === 0) this.#destinations.delete(id);
    const attempts = ok + failed;
    return {
      attempts,
      failures: failed,
      successRate: attempts === 0 ? 1 : ok / attempts,
      windowMs: this.#windowMs,
      ...(w?.lastFailure ? { lastFailure: w.lastFailure } : {}),
    };
  }

  /** Dead letters of window `index` (start: index × window), by destination. */
  deadLetters(index: number): ReadonlyMap<string, DeadCount> {
    return this.#dead.get(index) ?? new Map();
  }

  /** Windows up to `index` were announced: their counts go. */
  forgetDeadLetters(upTo: number): void {
    for (const k of this.#dead.keys()) if (k <= upTo) this.#dead.delete(k);
  }

  forget(id: string): void {
    this.#destinations.delete(id);
  }
}
