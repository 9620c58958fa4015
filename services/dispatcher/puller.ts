import { setTimeout as sleep } from "node:timers/promises";
import type { AckReplay, ConnectionState, Logger, PipelinedPublisher } from "@hookpost/core";
import { confirmingAck, isNotFound } from "@hookpost/core";
import { consumerOpts, type JetStreamClient, type JetStreamPullSubscription, type JsMsg } from "nats";

export interface PullerOptions {
  js: JetStreamClient;
  stream: string;
  consumer: string;
  /** At most this many messages are being handled at once (per replica). */
  concurrency: number;
  /** Long-poll length of one pull request. */
  expiresMs: number;
  handle: (msg: JsMsg) => Promise<void>;
  /** Acks, naks and progress notes go out through it, batched per event-loop turn. */
  acks: PipelinedPublisher;
  /** Confirmed acks, sent again when the consumer elects a new leader (core AckReplay). */
  ackReplay?: AckReplay | undefined;
  /** No pulls while the connection is down; open pull requests are forgotten when it comes back. */
  connection: ConnectionState;
  logger: Logger;
  /**
   * The consumer was deleted (an idle lane removed by another replica): called once, instead of
   * pulling again; the puller has paused. Absent: keep trying (the consumer should exist).
   */
  onGone?: () => void;
  /**
   * The consumer is missing (deleted by hand, or lost with a server's state) and must exist: it
   * creates it again (idempotent), then the puller pulls on. Absent (and no onGone): the puller
   * keeps trying, for something else to create it.
   */
  recreate?: () => Promise<void>;
  /** A message whose handler threw comes back after this, doubled at each delivery (default 5 s). */
  failedRetryMs?: number;
}

/** The longest a message whose handler keeps throwing waits between two tries. */
const FAILED_RETRY_MAX_MS = 5 * 60_000;

/**
 * When a message whose handler threw (a bug, never an endpoint's failure) comes back: `baseMs`
 * doubled per delivery, at most FAILED_RETRY_MAX_MS. It stays on its stream, so a fixed replica
 * handles it; meanwhile a batch of such messages takes a few slots, not every slot every 5 s.
 */
export function failedRetryMs(baseMs: number, deliveryCount: number): number {
  return Math.min(FAILED_RETRY_MAX_MS, baseMs * 2 ** Math.min(20, Math.max(0, deliveryCount - 1)));
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
 *
 * Pull requests live only in the server's memory. When the connection drops (nats-server killed
 * and restarted, or the client moved to another server), the requests this puller counted as
 * open are gone, and nothing says so: no message and no 408 ever answers them. Their slots used
 * to stay promised, and as every arriving message is counted against the oldest open request,
 * the unanswerable count moved on to each newer request and never expired: after an outage of
 * a few seconds or more a replica kept only the slots the lost requests had not held (5 to 9 of
 * 16 in our runs, ~4 in the issue), for good. Hence: no pulls while the connection is down, and
 * once it is back (and the consumer answers again) the open requests are forgotten.
 */
export class Puller {
  readonly #o: PullerOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  #sub: JetStreamPullSubscription | undefined;
  #reader: Promise<void> | undefined;
  /**
   * Open pull requests: messages asked for and not received yet, and when the request expires.
   * Times are on the monotonic clock (performance.now()): a request's life is a duration, and
   * with the wall clock one that jumped back an hour kept every request "open", and so every slot
   * promised, for that hour: nothing was pulled.
   */
  #requests: { remaining: number; endsAt: number }[] = [];
  /** When the last pull request has surely ended at the server (late answers included). */
  #pullEnds = 0;
  readonly #inFlight = new Set<Promise<void>>();
  #wakeLoop: (() => void) | undefined;
  /** The connection dropped since the last pull: the open requests are lost. */
  #stale = false;
  #wake: AbortController = new AbortController();

  /** Stops listening to the connection: once the puller is retired. */
  readonly #stopWatching: () => void;

  constructor(o: PullerOptions) {
    this.#o = o;
    // Also while paused: requests left open by pause() are lost with the connection all the same.
    this.#stopWatching = o.connection.onChange(() => {
      this.#stale = true;
      this.#wakeLoop?.();
    });
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
    this.#stopWatching();
  }

  /** Resolves once the last pull request ended, the subscription closed and no message is handled. */
  async drain(): Promise<void> {
    await this.#loop;
    const wait = this.#pullEnds - performance.now();
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

  /** Free slots: neither handling a message nor promised to an open pull request. */
  #free(): number {
    let outstanding = 0;
    for (const r of this.#requests) outstanding += r.remaining;
    return this.#o.concurrency - this.#inFlight.size - outstanding;
  }

  /** How many free slots make a new pull request worth its round trip. */
  #pullAt(): number {
    return Math.max(1, Math.ceil(this.#o.concurrency / 4));
  }

  async #run(): Promise<void> {
    const o = this.#o;
    /** The last wait ended by its timer: nothing freed enough slots meanwhile. */
    let quiet = true;
    while (this.#running) {
      try {
        // A pull written now would wait in the client's buffer and reach the server (restarted
        // or not) unaccounted for: wait for the connection instead.
        if (!o.connection.connected) {
          quiet = await this.#wait(o.expiresMs);
          continue;
        }
        if (this.#stale) {
          // After a restart the consumer answers only once JetStream has recovered it; a pull
          // sent before that is lost like the ones before the outage.
          if (this.#sub) await this.#consumerInfo();
          this.#stale = false;
          this.#requests = [];
        }
        const sub = this.#sub ?? (await this.#open());
        const now = performance.now();
        this.#requests = this.#requests.filter((r) => r.remaining > 0 && r.endsAt > now);
        const free = this.#free();
        // Ask again once a quarter of the slots is free, not at every freed slot: a request per
        // message doubled the round trips and the server's work under load. After a quiet wait
        // any free slot is asked for, so a few slots held long (acks being confirmed, a slow
        // endpoint) never stop the rest.
        if (free > 0 && (free >= this.#pullAt() || quiet)) {
          sub.pull({ batch: free, expires: o.expiresMs });
          this.#requests.push({ remaining: free, endsAt: now + o.expiresMs });
          this.#pullEnds = now + o.expiresMs + LATE_SLACK_MS;
        }
        // Until enough slots free, a request expires, or pause(); the timer is a fallback.
        const next = Math.min(performance.now() + o.expiresMs, ...this.#requests.map((r) => r.endsAt));
        quiet = await this.#wait(next - performance.now());
      } catch (err) {
        if (!this.#running) break;
        this.#closeSub();
        if (o.onGone && isNotFound(err)) {
          this.#running = false;
          o.onGone();
          break;
        }
        if (o.recreate && isNotFound(err)) {
          const created = await o.recreate().then(
            () => true,
            (e: unknown) => {
              o.logger.warn(
                { consumer: o.consumer, err: (e as Error).message },
                "creating a missing consumer failed",
              );
              return false;
            },
          );
          if (created) {
            o.logger.warn({ consumer: o.consumer }, "the consumer was missing; created again");
            continue;
          }
        }
        o.logger.warn({ consumer: o.consumer, err: (err as Error).message }, "pull failed; retrying");
        await sleep(1000, undefined, { signal: this.#wake.signal }).catch(() => {});
      }
    }
  }

  /** Waits `ms` (true) or until woken (false): slots freed, pause(), the connection changed. */
  async #wait(ms: number): Promise<boolean> {
    const quiet = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(true), Math.max(10, ms));
      this.#wakeLoop = () => {
        clearTimeout(t);
        resolve(false);
      };
    });
    this.#wakeLoop = undefined;
    return quiet;
  }

  async #consumerInfo() {
    return (await this.#o.js.consumers.get(this.#o.stream, this.#o.consumer)).info(true);
  }

  async #open(): Promise<JetStreamPullSubscription> {
    const opts = consumerOpts();
    opts.bind(this.#o.stream, this.#o.consumer);
    opts.manualAck();
    // A bound subscription must name the consumer's own filter subject.
    const info = await this.#consumerInfo();
    const sub = await this.#o.js.pullSubscribe(info.config.filter_subject ?? "", opts);
    this.#sub = sub;
    this.#requests = [];
    this.#reader = (async () => {
      for await (const msg of sub) {
        // Counted against the oldest open request; a late one may push past the limit briefly.
        const r = this.#requests.find((q) => q.remaining > 0);
        if (r) r.remaining--;
        // A message taking its slot leaves the free count as it was: nothing to wake for.
        if (this.#running) this.#start(msg);
        else msg.nak(); // paused or closing: someone else (or later) takes it
      }
    })()
      .catch((err) => {
        this.#o.logger.warn(
          { consumer: this.#o.consumer, err: (err as Error).message },
          "subscription ended",
        );
      })
      .finally(() => {
        // Ended by nats.js (an error status), not by #closeSub(): pulls on it would go unread.
        if (this.#sub !== sub) return;
        this.#closeSub();
        this.#wakeLoop?.();
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
    const { msg, confirmed } = confirmingAck(original, this.#o.logger, this.#o.acks, this.#o.ackReplay);
    const p = this.#o
      .handle(msg)
      .then(confirmed)
      .catch((err) => {
        // A bug, not an endpoint failure: hand the message back rather than lose it, later each time.
        const deliveries = msg.info.deliveryCount;
        const retryMs = failedRetryMs(this.#o.failedRetryMs ?? 5000, deliveries);
        this.#o.logger.error(
          { consumer: this.#o.consumer, seq: msg.seq, deliveries, retryMs, err },
          "handler failed",
        );
        try {
          msg.nak(retryMs);
        } catch {}
      })
      .finally(() => {
        this.#inFlight.delete(p);
        if (this.#free() >= this.#pullAt()) this.#wakeLoop?.();
      });
    this.#inFlight.add(p);
  }
}
