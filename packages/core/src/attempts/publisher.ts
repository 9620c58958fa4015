import type { NatsConnection } from "nats";
import type { Logger } from "../log/logger.js";
import { type BreakerReport, HealthTally } from "./health-tally.js";
import {
  type AttemptRecord,
  attemptRecordSubject,
  type DeadRecord,
  deadRecordSubject,
  deliveredJson,
  healthSubject,
  type LogRecord,
  ofDestination,
  type RoutedRecord,
  routedRecordSubject,
} from "./record.js";

export interface AttemptLogOptions {
  /** ATTEMPT_LOG: off records nothing. */
  enabled: boolean;
  /** ATTEMPT_LOG_BODIES: off leaves request bodies out. */
  bodies: boolean;
  /** Whether NATS is reachable now; records made while it is not are dropped and counted. */
  connected?: () => boolean;
  /** Bytes written but not yet flushed to the server at most; beyond that records are dropped. */
  maxPendingBytes?: number;
  logger: Logger;
  /** Called once per dropped record (NATS unreachable, or too much unflushed). */
  onDrop?: (why: DropReason) => void;
  /**
   * Writes records with other traffic in one socket write per event-loop turn (the dispatcher's
   * pipelined publisher); without it each record is a publish of its own.
   */
  writer?: { send(subject: string, data: Uint8Array): void };
  /**
   * Also fold every record into a health summary, written once per `everyMs` (default 1 s) on
   * `hookpost.health.<replica>`: what ingest reads for destination health (packages/core/src/attempts/health.ts).
   */
  health?: {
    replica: string;
    everyMs?: number;
    /** How often breakers that are not closed are reported again (default 60 s). */
    breakerRefreshMs?: number;
  };
}

export type DropReason = "disconnected" | "full";

const DEFAULT_MAX_PENDING_BYTES = 8 * 1024 * 1024;
/** Unflushed bytes are counted down when the connection has flushed them, at most this often. */
const FLUSH_EVERY_MS = 100;
const DROP_LOG_EVERY_MS = 10_000;
const HEALTH_EVERY_MS = 1000;
/**
 * Breakers that are not closed are reported again this often: ingest tells a live replica's open
 * breaker (refreshed) from one of a replica that died without saying so (health.ts BREAKER_STALE_MS).
 */
const BREAKER_REFRESH_MS = 60_000;
/** Breakers one summary reports again at most; the rest go in the next windows. */
const MAX_BREAKERS_PER_SUMMARY = 2000;

/**
 * Writes the attempt log without ever holding up a delivery. Records are plain NATS publishes on
 * the stream's subjects (JetStream stores them as they arrive) rather than JetStream publishes
 * awaiting an ack: measured, a JetStream publish costs about 100 µs of CPU per record here against
 * 15 µs, and the log must not slow deliveries down. What is not flushed yet is bounded; records
 * beyond that, or made while NATS is unreachable, are dropped and counted (and logged at most
 * every 10 s); deliveries go on.
 */
export class AttemptLog {
  readonly #nc: NatsConnection;
  readonly #o: AttemptLogOptions;
  readonly #maxPending: number;
  #pendingBytes = 0;
  #flushing: Promise<void> | undefined;
  #dropped = 0;
  #lastDropLog = 0;
  readonly #tally = new HealthTally();
  readonly #healthEveryMs: number;
  #healthTimer: ReturnType<typeof setTimeout> | undefined;
  /** Destination -> latest report of its breaker, while not closed. */
  readonly #breakers = new Map<string, BreakerReport>();
  /** Breakers still to be reported again in this refresh round. */
  #refreshIds: string[] = [];
  #refreshTimer: ReturnType<typeof setInterval> | undefined;
  /** A breaker was reported: leaving must be said at close. */
  #breakerReported = false;

  constructor(nc: NatsConnection, o: AttemptLogOptions) {
    this.#nc = nc;
    this.#o = o;
    this.#maxPending = o.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES;
    this.#healthEveryMs = o.health?.everyMs ?? HEALTH_EVERY_MS;
  }

  get enabled(): boolean {
    return this.#o.enabled;
  }

  get dropped(): number {
    return this.#dropped;
  }

  attempt(record: AttemptRecord): void {
    const r = ofDestination(record);
    if (!this.#o.bodies) delete r.requestBody;
    this.#publish(attemptRecordSubject(r.destinationId), r);
    this.#fold(r);
  }

  dead(record: DeadRecord): void {
    const r = ofDestination(record);
    this.#publish(deadRecordSubject(r.destinationId), r);
    this.#fold(r);
  }

  routed(r: RoutedRecord): void {
    if (!this.#o.bodies) delete r.body;
    this.#publish(routedRecordSubject(r.sourceId), r);
    this.#fold(r);
  }

  /**
   * A call delivered at the first, direct attempt to its only destination: its routing record
   * and that attempt's in one message (record.ts `deliveredRecord`, written by `deliveredJson`): nats-server stores, and
   * feeds to the index, one message instead of two (docs/design/attempt-log-messages.md).
   */
  delivered(routed: RoutedRecord, attempt: AttemptRecord): void {
    if (!this.#o.bodies) delete routed.body;
    const a = ofDestination(attempt);
    this.#publish(attemptRecordSubject(a.destinationId), deliveredJson(routed, a));
    this.#fold(routed);
    this.#fold(a);
  }

  /**
   * A destination's breaker changed on this replica (the dispatcher's `breakers.view(id)`). It
   * goes in the next health summary (within a window), and while not closed it is reported again
   * every refresh, so that ingest shows it for as long as it holds calls back.
   */
  breaker(destinationId: string, view: BreakerReport): void {
    if (!this.#o.enabled || !this.#o.health) return;
    // Copied: the caller's object is not kept.
    const report: BreakerReport = {
      state: view.state,
      failures: view.failures,
      ...(view.until === undefined ? {} : { until: view.until }),
    };
    this.#breakerReported = true;
    if (report.state === "closed") this.#breakers.delete(destinationId);
    else this.#breakers.set(destinationId, report);
    this.#tally.breaker(destinationId, report);
    this.#healthTimer ??= setTimeout(this.#writeHealth, this.#healthEveryMs).unref();
    if (this.#breakers.size === 0) {
      clearInterval(this.#refreshTimer);
      this.#refreshTimer = undefined;
    } else {
      const every = this.#o.health.breakerRefreshMs ?? BREAKER_REFRESH_MS;
      this.#refreshTimer ??= setInterval(this.#refreshBreakers, every).unref();
    }
  }

  /** Writes the health summary so far, then resolves when the server has everything written (or after `ms`). */
  async flush(ms = 5000): Promise<void> {
    clearTimeout(this.#healthTimer);
    this.#writeHealth();
    await this.#serverFlush(ms);
  }

  /**
   * At shutdown, instead of flush(): writes the summary so far saying that this replica leaves,
   * so that its breakers stop showing at once, then waits for the server as flush() does.
   */
  async close(ms = 5000): Promise<void> {
    clearInterval(this.#refreshTimer);
    clearTimeout(this.#healthTimer);
    this.#refreshTimer = undefined;
    this.#healthTimer = undefined;
    this.#breakers.clear();
    this.#refreshIds = [];
    const health = this.#o.health;
    const summary = health && this.#tally.take(health.replica, Date.now(), this.#breakerReported);
    if (health && summary) this.#publish(healthSubject(health.replica), summary);
    await this.#serverFlush(ms);
  }

  async #serverFlush(ms: number): Promise<void> {
    await Promise.race([
      this.#nc.flush().catch(() => {}),
      new Promise((resolve) => setTimeout(resolve, ms).unref()),
    ]);
  }

  /** `record` as an object, or already its JSON text. */
  #publish(subject: string, record: object | string): void {
    if (!this.#o.enabled) return;
    if (this.#o.connected && !this.#o.connected()) {
      this.#drop("disconnected");
      return;
    }
    if (this.#pendingBytes >= this.#maxPending) {
      this.#drop("full");
      return;
    }
    // Buffer.from: the same UTF-8 bytes as a TextEncoder, in about half the time.
    const data = Buffer.from(typeof record === "string" ? record : JSON.stringify(record));
    try {
      if (this.#o.writer) this.#o.writer.send(subject, data);
      else this.#nc.publish(subject, data);
    } catch {
      this.#drop("disconnected");
      return;
    }
    this.#pendingBytes += data.length;
    // A server round trip confirms that what was written before it has been received.
    this.#flushing ??= new Promise<void>((resolve) => setTimeout(resolve, FLUSH_EVERY_MS).unref()).then(
      async () => {
        const written = this.#pendingBytes;
        await this.#nc.flush().catch(() => {});
        this.#pendingBytes = Math.max(0, this.#pendingBytes - written);
        this.#flushing = undefined;
      },
    );
  }

  /** Health counts every record, written or dropped: a full log does not make a destination look idle. */
  #fold(r: LogRecord): void {
    if (!this.#o.enabled || !this.#o.health) return;
    this.#tally.fold(r);
    this.#healthTimer ??= setTimeout(this.#writeHealth, this.#healthEveryMs).unref();
  }

  /** A refresh round: every breaker not closed goes in the next summaries again. */
  readonly #refreshBreakers = (): void => {
    this.#refreshIds = [...this.#breakers.keys()];
    if (this.#refreshIds.length > 0)
      this.#healthTimer ??= setTimeout(this.#writeHealth, this.#healthEveryMs).unref();
  };

  readonly #writeHealth = (): void => {
    this.#healthTimer = undefined;
    const health = this.#o.health;
    if (!health || (this.#tally.empty && this.#refreshIds.length === 0)) return;
    // Not now: the window stays open and is written with the next one.
    const away = this.#o.connected && !this.#o.connected();
    if (away || this.#pendingBytes >= this.#maxPending) {
      this.#healthTimer = setTimeout(this.#writeHealth, this.#healthEveryMs).unref();
      return;
    }
    for (const id of this.#refreshIds.splice(0, MAX_BREAKERS_PER_SUMMARY)) {
      const report = this.#breakers.get(id);
      if (report) this.#tally.breaker(id, report);
    }
    if (!this.#tally.empty) this.#publish(healthSubject(health.replica), this.#tally.take(health.replica)!);
    if (this.#refreshIds.length > 0)
      this.#healthTimer = setTimeout(this.#writeHealth, this.#healthEveryMs).unref();
  };

  #drop(why: DropReason): void {
    this.#dropped++;
    this.#o.onDrop?.(why);
    const now = Date.now();
    if (now - this.#lastDropLog >= DROP_LOG_EVERY_MS) {
      this.#lastDropLog = now;
      this.#o.logger.warn(
        { dropped: this.#dropped, why },
        "attempt log records dropped (deliveries are not affected)",
      );
    }
  }
}
