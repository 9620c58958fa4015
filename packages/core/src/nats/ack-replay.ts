import { setTimeout as sleep } from "node:timers/promises";
import type { NatsConnection, Subscription } from "nats";
import type { Logger } from "../log/logger.js";
import { isTransient } from "./jetstream-errors.js";
import { type PipelinedPublisher, statusError } from "./pipelined-publisher.js";

/** nats-server announces each consumer leader it elects here (`.<stream>.<consumer>`). */
const LEADER_ELECTED = "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED";
/**
 * How far back acks are sent again. An election ends within about 5 to 8 s of a leader's death
 * (docs/operations.md), and the acks it may have lost were confirmed just before it died.
 */
const REPLAY_WINDOW_MS = 15_000;
/** Acks remembered at most (oldest first out): a few MB; 15 s at 3 300 acks/s. */
const REPLAY_MAX = 50_000;
/**
 * How an ack goes again: soon after the advisory (nats-server sends it just before the new leader
 * listens for acks), then again while the answer is "503 no responders" (no leader listening yet)
 * or none comes, for a few seconds at most.
 */
const REPLAY_FIRST_MS = 50;
const REPLAY_RETRY_MS = 200;
const REPLAY_TRIES = 15;
const REPLAY_ANSWER_MS = 1000;
/** Consumers whose last confirmed ack is remembered, at most (past it, the stale are forgotten). */
const MAX_CONSUMERS = 10_000;

export interface AckReplayOptions {
  windowMs?: number;
  max?: number;
}

/**
 * Sends a consumer's recently confirmed acks again when JetStream elects it a new leader.
 *
 * nats-server 2.9 answers an ack as soon as its leader proposes it to the consumer's raft group
 * (server/consumer.go processAck), not once the group stored it: a leader killed right after
 * confirming leaves those acks on the dead node alone, and its successor hands the messages out
 * again after ack-wait. In `npm run test:cluster` (a consumer leader killed -9 under load), with
 * acks confirmed only by a leader's answer (confirmed-ack.ts) 12, 0 and 0 webhooks still came
 * twice in three runs, and 5, 0 and 0 with this replay too. Acking a message the new leader no
 * longer holds changes nothing, so every ack of the last 15 s goes again, each until a leader
 * answers it.
 */
export class AckReplay {
  readonly #pipe: PipelinedPublisher;
  readonly #logger: Logger;
  readonly #windowMs: number;
  readonly #subjects: (string | undefined)[];
  /** Each remembered ack's consumer ("<stream>.<consumer>"), read once when it was confirmed. */
  readonly #keys: (string | undefined)[];
  readonly #times: Float64Array;
  #next = 0;
  /**
   * When each consumer ("<stream>.<consumer>") last had an ack confirmed: a leader elected for a
   * consumer with none in the window (a lane just created, in a cluster every lane's first
   * election) costs a lookup, not a scan of every remembered ack.
   */
  readonly #lastAck = new Map<string, number>();
  readonly #sub: Subscription;
  #closed = false;

  constructor(nc: NatsConnection, pipe: PipelinedPublisher, logger: Logger, o: AckReplayOptions = {}) {
    this.#pipe = pipe;
    this.#logger = logger;
    this.#windowMs = o.windowMs ?? REPLAY_WINDOW_MS;
    const max = o.max ?? REPLAY_MAX;
    this.#subjects = new Array<string | undefined>(max);
    this.#keys = new Array<string | undefined>(max);
    this.#times = new Float64Array(max);
    this.#sub = nc.subscribe(`${LEADER_ELECTED}.>`, {
      callback: (_err, msg) => this.#elected(msg.subject),
    });
  }

  /** An ack confirmed now on `ackSubject` (the message's reply subject). */
  confirmed(ackSubject: string): void {
    const now = performance.now();
    const key = consumerOf(ackSubject);
    if (key === undefined) return;
    this.#subjects[this.#next] = ackSubject;
    this.#keys[this.#next] = key;
    this.#times[this.#next] = now;
    this.#next = (this.#next + 1) % this.#subjects.length;
    // Consumers come and go (lanes): the stale ones are forgotten once there are many.
    if (!this.#lastAck.has(key) && this.#lastAck.size >= MAX_CONSUMERS) this.#forgetStale(now);
    this.#lastAck.set(key, now);
  }

  #forgetStale(now: number): void {
    for (const [key, at] of this.#lastAck) if (at < now - this.#windowMs) this.#lastAck.delete(key);
  }

  close(): void {
    this.#closed = true;
    this.#sub.unsubscribe();
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
      if (s !== undefined && this.#keys[i] === key && this.#times[i]! >= since) acks.push(s);
    }
    if (acks.length === 0) return;
    this.#logger.info(
      { stream, consumer, acks: acks.length },
      "consumer leader elected: recent acks sent again",
    );
    for (const ack of acks) void this.#resend(ack);
  }

  /** Sends one ack again until a leader answers it (or a few seconds passed). */
  async #resend(ackSubject: string): Promise<void> {
    await sleep(REPLAY_FIRST_MS, undefined, { ref: false });
    for (let i = 0; i < REPLAY_TRIES && !this.#closed; i++) {
      try {
        const reply = await this.#pipe.request(ackSubject, "+ACK", undefined, REPLAY_ANSWER_MS);
        if (!statusError(reply)) return;
      } catch (err) {
        if (!isTransient(err)) return; // closing
      }
      await sleep(REPLAY_RETRY_MS, undefined, { ref: false });
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
