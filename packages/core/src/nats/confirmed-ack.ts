import { setTimeout as sleep } from "node:timers/promises";
import type { JsMsg } from "nats";
import type { Logger } from "../log/logger.js";
import type { AckReplay } from "./ack-replay.js";
import { isTransient, jetStreamErrorText } from "./jetstream-errors.js";
import { type PipelinedPublisher, statusError } from "./pipelined-publisher.js";

/** How long an ack is resent before the message is left to come back after ack-wait. */
const CONFIRM_FOR_MS = 30_000;

/** A message whose ack() is confirmed by JetStream, and `confirmed` settles once it is (or gave up). */
export interface ConfirmingMsg {
  msg: JsMsg;
  confirmed(): Promise<void>;
}

// The JetStream ack protocol (what nats.js's JsMsg sends as well).
const ACK = "+ACK";
const NAK = "-NAK";
const WPI = "+WPI";
const TERM = "+TERM";

/**
 * Wraps a message so that ack() waits for the consumer leader's confirmation and is sent
 * again when none comes: a plain ack sent while the consumer's leader dies is lost, and the
 * message would be delivered twice after ack-wait.
 *
 * Acks, naks, terms and progress notes go out through `pipe` rather than nats.js's JsMsg: a
 * JsMsg ackAck() is a nats.js request (a timer and an error object with a stack per ack) and
 * every ack left in a socket write of its own, which the dispatcher profile showed as a quarter
 * of its CPU. Through the pipelined publisher they share one inbox and the writes of one
 * event-loop turn go out together.
 *
 * A confirmed ack is not yet stored by the consumer's raft group: `replay` sends it again when
 * the consumer elects a new leader (ack-replay.ts).
 */
export function confirmingAck(
  msg: JsMsg,
  logger: Logger,
  pipe: PipelinedPublisher,
  replay?: AckReplay,
): ConfirmingMsg {
  const wrapped = new PipelinedAckMsg(msg, logger, pipe, replay);
  return { msg: wrapped, confirmed: () => wrapped.confirmation ?? Promise.resolve() };
}

class PipelinedAckMsg implements JsMsg {
  readonly #msg: JsMsg;
  readonly #logger: Logger;
  readonly #pipe: PipelinedPublisher;
  readonly #replay: AckReplay | undefined;
  /** The consumer's ack subject: every ack, nak and progress note goes there. */
  readonly #ackSubject: string;
  /** Set once ack, nak or term was sent: they are final, as in nats.js. */
  #done = false;
  confirmation: Promise<void> | undefined;

  constructor(msg: JsMsg, logger: Logger, pipe: PipelinedPublisher, replay: AckReplay | undefined) {
    this.#msg = msg;
    this.#logger = logger;
    this.#pipe = pipe;
    this.#replay = replay;
    // JsMsgImpl keeps it; the JsMsg interface does not name it.
    this.#ackSubject = (msg as unknown as { reply: string }).reply;
  }

  get redelivered() {
    return this.#msg.redelivered;
  }
  get info() {
    return this.#msg.info;
  }
  get seq() {
    return this.#msg.seq;
  }
  get data() {
    return this.#msg.data;
  }
  get subject() {
    return this.#msg.subject;
  }
  get sid() {
    return this.#msg.sid;
  }
  get headers() {
    return this.#msg.headers;
  }

  ack(): void {
    if (this.#final()) return;
    this.confirmation = this.#confirm();
  }

  async ackAck(): Promise<boolean> {
    this.ack();
    await this.confirmation;
    return true;
  }

  nak(millis?: number): void {
    if (this.#final()) return;
    this.#send(millis ? `${NAK} ${JSON.stringify({ delay: millis * 1_000_000 })}` : NAK);
  }

  working(): void {
    if (!this.#done) this.#send(WPI);
  }

  term(reason?: string): void {
    if (this.#final()) return;
    this.#send(reason ? `${TERM} ${reason}` : TERM);
  }

  next(): void {
    throw new Error("next() is not used with pipelined acks");
  }

  json<T>(): T {
    return this.#msg.json<T>();
  }

  string(): string {
    return this.#msg.string();
  }

  #final(): boolean {
    const was = this.#done;
    this.#done = true;
    return was;
  }

  #send(payload: string): void {
    try {
      this.#pipe.send(this.#ackSubject, payload);
    } catch {
      // Closing: the message comes back after its ack-wait.
    }
  }

  async #confirm(): Promise<void> {
    const giveUpAt = Date.now() + CONFIRM_FOR_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        // Waits the publisher's timeout: one deadline for everything keeps its sweep in order.
        // A status is no confirmation: "503 no responders" is what the server answers while the
        // consumer has no leader (only a leader listens for acks), all through an election.
        const status = statusError(await this.#pipe.request(this.#ackSubject, ACK));
        if (status) throw status;
        this.#replay?.confirmed(this.#ackSubject);
        return;
      } catch (err) {
        if (!isTransient(err) || Date.now() > giveUpAt) {
          this.#logger.warn(
            { seq: this.#msg.seq, err: jetStreamErrorText(err) },
            "ack not confirmed; the message may be delivered again",
          );
          return;
        }
        await sleep(Math.min(1000, 50 * 2 ** attempt));
      }
    }
  }
}
