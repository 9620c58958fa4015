import type { JetStreamClient } from "nats";
import type { Logger } from "../log/logger.js";
import {
  type AttemptRecord,
  attemptSubject,
  type DeadRecord,
  messageHash,
  type RoutedRecord,
  routedSubject,
} from "./record.js";

export interface AttemptLogOptions {
  /** ATTEMPT_LOG: off records nothing. */
  enabled: boolean;
  /** ATTEMPT_LOG_BODIES: off leaves request bodies out. */
  bodies: boolean;
  /** Publishes awaiting their ack at most; beyond that records are dropped and counted. */
  maxOutstanding?: number;
  logger: Logger;
  /** Called once per dropped record (full, or the publish failed). */
  onDrop?: (why: "full" | "failed") => void;
}

const DEFAULT_MAX_OUTSTANDING = 2000;
const DROP_LOG_EVERY_MS = 10_000;
const encoder = new TextEncoder();

/**
 * Writes the attempt log without ever holding up a delivery: each record is published without
 * waiting for its ack, with a bounded number in flight. When JetStream is slow or away, records
 * are dropped and counted (and logged at most every 10 s); deliveries go on.
 */
export class AttemptLog {
  readonly #js: JetStreamClient;
  readonly #o: AttemptLogOptions;
  readonly #max: number;
  #outstanding = 0;
  #dropped = 0;
  #lastDropLog = 0;
  #idle: (() => void)[] = [];

  constructor(js: JetStreamClient, o: AttemptLogOptions) {
    this.#js = js;
    this.#o = o;
    this.#max = o.maxOutstanding ?? DEFAULT_MAX_OUTSTANDING;
  }

  get enabled(): boolean {
    return this.#o.enabled;
  }

  get dropped(): number {
    return this.#dropped;
  }

  attempt(r: AttemptRecord): void {
    if (!this.#o.bodies) delete r.requestBody;
    this.#publish(attemptSubject(r.destinationId, messageHash(r.messageId)), r);
  }

  dead(r: DeadRecord): void {
    this.#publish(attemptSubject(r.destinationId, messageHash(r.messageId)), r);
  }

  routed(r: RoutedRecord): void {
    if (!this.#o.bodies) delete r.body;
    this.#publish(routedSubject(messageHash(r.messageId)), r);
  }

  /** Resolves when every record published so far is acked or dropped (or after `ms`). */
  async flush(ms = 5000): Promise<void> {
    if (this.#outstanding === 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      t.unref();
      this.#idle.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  #publish(subject: string, record: object): void {
    if (!this.#o.enabled) return;
    if (this.#outstanding >= this.#max) {
      this.#drop("full");
      return;
    }
    this.#outstanding++;
    let p: Promise<unknown>;
    try {
      p = this.#js.publish(subject, encoder.encode(JSON.stringify(record)));
    } catch {
      p = Promise.reject(new Error("publish refused"));
    }
    p.catch(() => this.#drop("failed")).finally(() => {
      this.#outstanding--;
      if (this.#outstanding === 0) for (const f of this.#idle.splice(0)) f();
    });
  }

  #drop(why: "full" | "failed"): void {
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
