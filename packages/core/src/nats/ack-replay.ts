import type { NatsConnection, Subscription } from "nats";
import type { Logger } from "../log/logger.js";
import type { PipelinedPublisher } from "./pipelined-publisher.js";

/** nats-server announces each consumer leader it elects here (`.<stream>.<consumer>`). */
const LEADER_ELECTED = "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED";
/**
 * How far back acks are sent again. An election ends within about 5 to 8 s of a leader's death
 * (docs/operations.md), and the acks it may have lost were confirmed just before it died.
 */
const REPLAY_WINDOW_MS = 15_000;
/** Acks remembered at most (oldest first out): about 3 MB, 15 s at 3 300 acks/s. */
const REPLAY_MAX = 50_000;
/**
 * When acks go again after the advisory: nats-server sends it just before the new leader
 * listens for acks, so once soon and once more a second later (an ack is idempotent).
 */
const REPLAY_AFTER_MS = [100, 1000];
/** Consumers whose last confirmed ack is remembered, at most (past it, the stale are forgotten). */
const MAX_CONSUMERS = 10_000;

export interface AckReplayOptions {
  windowMs?: number;
  max?: number;
}

/**
 * Sends a consumer's recently confirmed acks again when JetStream elects it a new leader.
 *
 * nats-server 2.9 answers an ack as soon as its leader proposes it to the consumer's raft group,
 * not once the group stored it: a leader killed right after confirming leaves those acks only
 * in the dead node, and its successor hands the messages out again after ack-wait. A consumer
 * leader's death made 0.3-1.3 % of deliveries come twice in `npm run test:cluster`, delivered
 * directly from EVENTS (its router consumer's acks) or from a partition. Acking a message the
 * new leader no longer holds does nothing, so every ack of the last 15 s goes again.
 */
export class AckReplay {
  readonly #pipe: PipelinedPublisher;
  readonly #logger: Logger;
  readonly #windowMs: number;
  readonly #subjects: (string | undefined)[];
  readonly #times: Float64Array;
  #next = 0;
  /**
   * When each consumer ("<stream>.<consumer>") last had an ack confirmed: a leader elected for a
   * consumer with none in the window (a lane just created, in a cluster every lane's first
   * election) costs a lookup, not a scan of every remembered ack.
   */
  readonly #lastAck = new Map<string, number>();
  readonly #sub: Subscription;
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();

  constructor(nc: NatsConnection, pipe: PipelinedPublisher, logger: Logger, o: AckReplayOptions = {}) {
    this.#pipe = pipe;
    this.#logger = logger;
    this.#windowMs = o.windowMs ?? REPLAY_WINDOW_MS;
    const max = o.max ?? REPLAY_MAX;
    this.#subjects = new Array<string | undefined>(max);
    this.#times = new Float64Array(max);
    this.#sub = nc.subscribe(`${LEADER_ELECTED}.>`, {
      callback: (_err, msg) => this.#elected(msg.subject),
    });
  }

  /** An ack confirmed now on `ackSubject` (the message's reply subject). */
  confirmed(ackSubject: string): void {
    const now = performance.now();
    this.#subjects[this.#next] = ackSubject;
    this.#times[this.#next] = now;
    this.#next = (this.#next + 1) % this.#subjects.length;
    const key = consumerOf(ackSubject);
    if (key === undefined) return;
    // Consumers come and go (lanes): the stale ones are forgotten once there are many.
    if (!this.#lastAck.has(key) && this.#lastAck.size >= MAX_CONSUMERS) this.#forgetStale(now);
    this.#lastAck.set(key, now);
  }

  #forgetStale(now: number): void {
    for (const [key, at] of this.#lastAck) if (at < now - this.#windowMs) this.#lastAck.delete(key);
  }

  close(): void {
    this.#sub.unsubscribe();
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }

  #elected(subject: string): void {
    // $JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.<stream>.<consumer>: names hold no dots.
    const tokens = subject.split(".");
    if (tokens.length !== 7) return;
    const [stream, consumer] = [tokens[5]!, tokens[6]!];
    const key = `${stream}.${consumer}`;
    const since = performance.now() - this.#windowMs;
    if ((this.#lastAck.get(key) ?? -1) < since) return;
    const acks: string[] = [];
    for (let i = 0; i < this.#subjects.length; i++) {
      const s = this.#subjects[i];
      if (s !== undefined && this.#times[i]! >= since && consumerOf(s) === key) acks.push(s);
    }
    if (acks.length === 0) return;
    this.#logger.info(
      { stream, consumer, acks: acks.length },
      "consumer leader elected: recent acks sent again",
    );
    for (const delay of REPLAY_AFTER_MS) {
      const t = setTimeout(() => {
        this.#timers.delete(t);
        for (const s of acks) {
          try {
            this.#pipe.send(s, "+ACK");
          } catch {
            return; // closing
          }
        }
      }, delay);
      t.unref();
      this.#timers.add(t);
    }
  }
}

/**
 * "<stream>.<consumer>" of an ack subject: `$JS.ACK.<stream>.<consumer>.<5 more>` (2.9) or
 * `$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.…` (2.10 and later).
 */
function consumerOf(ackSubject: string): string | undefined {
  const t = ackSubject.split(".");
  if (t.length === 9) return `${t[2]}.${t[3]}`;
  if (t.length >= 11) return `${t[4]}.${t[5]}`;
  return undefined;
}
