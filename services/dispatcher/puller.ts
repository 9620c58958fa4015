import { setTimeout as sleep } from "node:timers/promises";
import { consumerOpts, type JetStreamClient, type JetStreamPullSubscription, type JsMsg } from "nats";
import type { Logger } from "../../lib/log/logger.js";
import { confirmingAck } from "../../lib/nats/confirmed-ack.js";

export interface PullerOptions {
  js: JetStreamClient;
  stream: string;
  consumer: string;
  /** At most this many messages are being handled at once (per replica). */
  concurrency: number;
  /** Long-poll length of one pull request. */
  expiresMs: number;
  handle: (msg: JsMsg) => Promise<void>;
  logger: Logger;
}

/** A loaded server may answer a pull a little after its expiry: messages are still taken then. */
const LATE_SLACK_MS = 1000;

/**
 * Pulls from a durable consumer and handles messages with bounded concurrency. It only asks the
 * server for as many messages as it has free slots, so nothing waits in a client-side buffer
 * while its ack-wait runs out, and a slow consumer holds only its own slots.
 *
 * One subscription stays open across pull requests: a message the server sends after the
 * client thought a request had expired still arrives (a fetch() per request would close its
 * inbox first and strand such a message until its ack-wait ran out).
 *
 * pause() stops pulling (in-flight work finishes); resume() starts again; drain() waits until
 * the last pull request has ended and in-flight work is done.
 */
export class Puller {
  readonly #o: PullerOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  #sub: JetStreamPullSubscription | undefined;
  #reader: Promise<void> | undefined;
  /** Open pull requests: messages asked for and not received yet, and when the request expires. */
  #requests: { remaining: number; endsAt: number }[] = [];
  /** When the last pull request has surely ended at the server (late answers included). */
  #pullEnds = 0;
  readonly #inFlight = new Set<Promise<void>>();
  #wakeLoop: (() => void) | undefined;
  #wake: AbortController = new AbortController();

  constructor(o: PullerOptions) {
    this.#o = o;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Changes how many messages may be handled at once (0: none for now); applies at the next pull. */
  setConcurrency(n: number): void {
    if (this.#o.concurrency === n) return;
    this.#o.concurrency = n;
    this.#wakeLoop?.();
  }

  resume(): void {
    if (this.#running) return;
    this.#running = true;
    this.#wake = new AbortController();
    this.#loop ??= this.#run().finally(() => {
      this.#loop = undefined;
      // resume() raced with the loop's exit: start again.
      if (this.#running) {
        this.#running = false;
        this.resume();
      }
    });
  }

  /** Stops asking for messages. Messages of the open pull that still arrive are handed back. */
  pause(): void {
    this.#running = false;
    this.#wake.abort();
    this.#wakeLoop?.();
  }

  /** Pause, and close the subscription at once (its late messages come back after ack-wait). */
  abortPull(): void {
    this.pause();
    this.#closeSub();
  }

  /** Resolves once the last pull request ended, the subscription closed and no message is handled. */
  async drain(): Promise<void> {
    await this.#loop;
    const wait = this.#pullEnds - Date.now();
    if (this.#sub && wait > 0 && !this.#running) await sleep(wait, undefined, { ref: false });
    if (!this.#running) this.#closeSub();
    await this.#reader;
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /** Resolves once in-flight work is done, or after `ms`; true when it is done. */
  async settle(ms: number): Promise<boolean> {
    const all = Promise.allSettled([...this.#inFlight]).then(() => true);
    return Promise.race([all, sleep(ms, false, { ref: false })]);
  }

  async #run(): Promise<void> {
    const o = this.#o;
    while (this.#running) {
      try {
        const sub = this.#sub ?? (await this.#open());
        const now = Date.now();
        this.#requests = this.#requests.filter((r) => r.remaining > 0 && r.endsAt > now);
        const outstanding = this.#requests.reduce((n, r) => n + r.remaining, 0);
        const free = o.concurrency - this.#inFlight.size - outstanding;
        if (free > 0) {
          sub.pull({ batch: free, expires: o.expiresMs });
          this.#requests.push({ remaining: free, endsAt: now + o.expiresMs });
          this.#pullEnds = now + o.expiresMs + LATE_SLACK_MS;
        }
        // Until a slot frees, a message arrives, a request expires, or pause().
        // No open request (every slot busy): a freed slot wakes the loop; the timer is a fallback.
        const next = Math.min(Date.now() + o.expiresMs, ...this.#requests.map((r) => r.endsAt));
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Math.max(10, next - Date.now()));
          this.#wakeLoop = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wakeLoop = undefined;
      } catch (err) {
        if (!this.#running) break;
        this.#closeSub();
        o.logger.warn({ consumer: o.consumer, err: (err as Error).message }, "pull failed; retrying");
        await sleep(1000, undefined, { signal: this.#wake.signal }).catch(() => {});
      }
    }
  }

  async #open(): Promise<JetStreamPullSubscription> {
    const opts = consumerOpts();
    opts.bind(this.#o.stream, this.#o.consumer);
    opts.manualAck();
    // A bound subscription must name the consumer's own filter subject.
    const info = await (await this.#o.js.consumers.get(this.#o.stream, this.#o.consumer)).info(true);
    const sub = await this.#o.js.pullSubscribe(info.config.filter_subject ?? "", opts);
    this.#sub = sub;
    this.#requests = [];
    this.#reader = (async () => {
      for await (const msg of sub) {
        // Counted against the oldest open request; a late one may push past the limit briefly.
        const r = this.#requests.find((q) => q.remaining > 0);
        if (r) r.remaining--;
        if (this.#running) this.#start(msg);
        else msg.nak(); // paused or closing: someone else (or later) takes it
        this.#wakeLoop?.();
      }
    })().catch((err) => {
      this.#o.logger.warn({ consumer: this.#o.consumer, err: (err as Error).message }, "subscription ended");
    });
    return sub;
  }

  #closeSub(): void {
    const sub = this.#sub;
    this.#sub = undefined;
    this.#requests = [];
    if (sub && !sub.isClosed()) sub.unsubscribe();
  }

  #start(original: JsMsg): void {
    // The slot is held until the ack is confirmed: an ack lost to a leader change is resent.
    const { msg, confirmed } = confirmingAck(original, this.#o.logger);
    const p = this.#o
      .handle(msg)
      .then(confirmed)
      .catch((err) => {
        // A bug, not an endpoint failure: hand the message back rather than lose it.
        this.#o.logger.error({ consumer: this.#o.consumer, seq: msg.seq, err }, "handler failed");
        try {
          msg.nak(5000);
        } catch {}
      })
      .finally(() => {
        this.#inFlight.delete(p);
        this.#wakeLoop?.();
      });
    this.#inFlight.add(p);
  }
}
