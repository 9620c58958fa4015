import { setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import type { ConfigChange, ConfigStore, ConnectionState } from "@hookpost/core";
import { orderedPartitionFilter, partitionOf } from "@hookpost/core";
import type { JetStreamManager, NatsConnection, StoredMsg, Subscription } from "nats";
import type { ReplicaRegistry } from "../replica-registry.js";
import { type AttemptDeps, attemptHead, deadLetterHead } from "./attempt.js";
import { HeadStore, type OrderedKey, parseOrderedSubject } from "./head-store.js";
import { ownedPartitions } from "./ownership.js";
import { RouterFloor } from "./router-floor.js";
import { DestinationSlots } from "./slots.js";
import { SubjectView } from "./subject-view.js";

export interface OrderedDeps extends AttemptDeps {
  nc: NatsConnection;
  jsm: JetStreamManager;
  store: ConfigStore;
  registry: ReplicaRegistry;
  connection: ConnectionState;
  /** ORDERED_PARTITIONS: the same on every replica. */
  partitions: number;
  /** Heads in flight per destination when it sets no max_in_flight (DELIVERY_CONCURRENCY). */
  concurrency: number;
  /** How often owned partitions are listed again, as a safety net for missed notifications. */
  rescanMs?: number;
}

const RESCAN_MS = 30_000;
/** After a failed read or delete (NATS away, leader election): wait this long and try again. */
const ERROR_PAUSE_MS = 1000;
/** A dead letter that could not be written: the head is tried again after this. */
const DEAD_WRITE_PAUSE_MS = 5000;
/**
 * A notification can overtake the store: the subscriber may hear of a call before the stream
 * leader has written it. A worker woken by one that finds nothing looks again after these waits.
 */
const RECHECK_MS = [5, 25, 100, 500];
/** A call waiting this long for the router's floor has the unrouted events before it looked through. */
const STUCK_FLOOR_MS = 500;
/** A destination unknown here may be one created a moment ago on another replica. */
const UNKNOWN_DESTINATION_WAIT_MS = 5000;
/** After auto-disable decided to pause: wait for the pause to reach this replica's store. */
const PAUSE_SEEN_WAIT_MS = 2000;

/**
 * A head read longer ago than this (a wait for a slot or the rate limit, a frozen process) is read
 * again before it is sent: meanwhile another owner may have delivered it and the next one.
 */
const STALE_HEAD_MS = 10;

/** setTimeout's largest delay; a longer wait simply looks again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** One user's worker: at most one per subject on a replica. */
interface Worker {
  /** Notifications since the last head was found. */
  kicks: number;
}

/**
 * Delivery of PER_USER destinations (docs/design/delivery-at-scale.md section 4).
 *
 * Calls wait on HOOKPOST_ORDERED, one subject per (destination, user). A call is sent only while
 * it is the first one stored on its subject (the head) and deleted only once delivered or
 * dead-lettered, so a user's later call is never first sent before an earlier one was done with,
 * whoever sends and whatever crashed: it is a property of what is stored.
 *
 * Ordered partition q (every destination lives in one) is worked by one replica, chosen by
 * rendezvous hashing over the live replicas. The owner hears of new calls through a core NATS
 * subscription to the partition's subjects and lists the partition's non-empty subjects on start,
 * on takeover, after a reconnect and every 30 s. Each user with work has one worker, which sends
 * its head, waits out a retry on its own timer, and goes on to the next head; many users run in
 * parallel within the destination's max_in_flight and rate limit.
 */
export class OrderedDelivery {
  readonly #d: OrderedDeps;
  readonly #heads: HeadStore;
  readonly #slots: DestinationSlots;
  readonly #floor: RouterFloor;
  #owned = new Set<number>();
  readonly #subs = new Map<number, Subscription>();
  readonly #workers = new Map<string, Worker>();
  readonly #running = new Set<Promise<void>>();
  /** Wakes workers waiting on a destination's configuration (paused, unknown). */
  readonly #configWaiters = new Map<string, Set<() => void>>();
  /** Destination ids with stored calls that were unknown at the last rescan. */
  #suspects = new Set<string>();
  /** Stop starting heads: retry timers and waits end, the worker loops return. */
  readonly #stop = new AbortController();
  /** Grace over: in-flight requests are cut short (the heads stay stored). */
  readonly #abort = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #offConnection: (() => void) | undefined;
  readonly #onReplicas = () => this.#rebalance();
  readonly #onConfig = (c: ConfigChange) => {
    if (c.kind !== "destination") return;
    for (const wake of this.#configWaiters.get(c.id) ?? []) wake();
    if (!c.record) void this.#purgeDeleted(c.id);
  };

  constructor(deps: OrderedDeps) {
    this.#d = deps;
    this.#heads = new HeadStore(deps.jsm);
    this.#slots = new DestinationSlots(deps.concurrency);
    this.#floor = new RouterFloor(deps.jsm);
    // Every waiting worker listens to these: bounded by the users with work, not a leak.
    setMaxListeners(0, this.#stop.signal);
    setMaxListeners(0, this.#abort.signal);
  }

  start(): void {
    const d = this.#d;
    d.registry.on("change", this.#onReplicas);
    d.store.on("change", this.#onConfig);
    this.#offConnection = d.connection.onChange((up) => {
      if (up) void this.#rescan([...this.#owned]);
    });
    this.#rebalance();
    this.#timer = setInterval(() => void this.#rescan([...this.#owned], true), d.rescanMs ?? RESCAN_MS);
    this.#timer.unref();
  }

  /** Ordered partitions this replica works now. */
  get owned(): ReadonlySet<number> {
    return this.#owned;
  }

  /** Calls of a destination still waiting in ORDERED (for health and metrics). */
  pending(destinationId: string): Promise<number> {
    return this.#heads.pending(partitionOf(destinationId, this.#d.partitions), destinationId);
  }

  /**
   * Graceful: no new head is started; requests in flight finish (their heads are deleted) within
   * `graceMs`, then they are cut short and their heads stay stored for the next owner.
   */
  async close(graceMs = 0): Promise<void> {
    const d = this.#d;
    this.#stop.abort();
    clearInterval(this.#timer);
    d.registry.off("change", this.#onReplicas);
    d.store.off("change", this.#onConfig);
    this.#offConnection?.();
    for (const sub of this.#subs.values()) sub.unsubscribe();
    this.#subs.clear();
    this.#owned = new Set();
    const all = Promise.allSettled([...this.#running]);
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), graceMs);
    });
    if ((await Promise.race([all, graceOver])) === "late") this.#abort.abort();
    clearTimeout(timer);
    await all;
  }

  /** Takes over and gives up partitions after the live replicas changed. */
  #rebalance(): void {
    const d = this.#d;
    if (this.#stop.signal.aborted) return;
    const next = ownedPartitions(d.registry.id, d.registry.live, d.partitions);
    const gained = [...next].filter((q) => !this.#owned.has(q));
    for (const q of this.#owned) {
      if (next.has(q)) continue;
      // Its workers see it is gone before their next head and stop.
      this.#subs.get(q)?.unsubscribe();
      this.#subs.delete(q);
    }
    this.#owned = next;
    for (const q of gained) {
      this.#subs.set(
        q,
        d.nc.subscribe(orderedPartitionFilter(q), {
          callback: (err, msg) => {
            if (!err) this.#kick(msg.subject, true);
          },
        }),
      );
    }
    if (gained.length > 0) {
      d.logger.info({ partitions: next.size, gained: gained.length }, "ordered partitions taken over");
      void this.#rescan(gained);
    }
  }

  /** Lists the users with stored calls in these partitions and makes sure each has a worker. */
  async #rescan(partitions: number[], periodic = false): Promise<void> {
    const d = this.#d;
    if (partitions.length === 0) return;
    const unknown = new Set<string>();
    let subjects: string[];
    try {
      // One listing of the whole stream when several partitions are asked (start, a reconnect).
      subjects = Object.keys(await this.#heads.subjects(partitions.length === 1 ? partitions[0] : undefined));
    } catch (err) {
      d.logger.warn({ err: (err as Error).message }, "listing ordered calls failed");
      return;
    }
    const asked = new Set(partitions);
    for (const subject of subjects) {
      const key = parseOrderedSubject(subject);
      if (!key || !asked.has(key.q) || !this.#owned.has(key.q)) continue;
      if (d.store.destination(key.destinationId)) this.#kick(subject, false);
      else unknown.add(key.destinationId);
    }
    if (!periodic) return;
    // Unknown on two periodic scans in a row: deleted while no owner watched (not one created a
    // moment ago elsewhere, which this replica's store learns within a second or two).
    const suspects = this.#suspects;
    this.#suspects = unknown;
    for (const id of unknown) if (suspects.has(id)) void this.#purgeDeleted(id);
  }

  /** Calls of a deleted destination are dropped by the owner of its partition. */
  async #purgeDeleted(id: string): Promise<void> {
    const d = this.#d;
    const q = partitionOf(id, d.partitions);
    this.#slots.forget(id);
    if (!this.#owned.has(q) || d.store.destination(id)) return;
    try {
      const purged = await this.#heads.purge(q, id);
      this.#suspects.delete(id);
      if (purged > 0)
        d.logger.info({ destinationId: id, purged }, "ordered calls of a deleted destination purged");
    } catch (err) {
      // The next rescan finds them again (unknown twice) and retries.
      d.logger.warn({ destinationId: id, err: (err as Error).message }, "purging ordered calls failed");
    }
  }

  #kick(subject: string, notified: boolean): void {
    const key = parseOrderedSubject(subject);
    if (!key || !this.#owned.has(key.q) || this.#stop.signal.aborted) return;
    const running = this.#workers.get(subject);
    if (running) {
      if (notified) running.kicks++;
      return;
    }
    const w: Worker = { kicks: notified ? 1 : 0 };
    this.#workers.set(subject, w);
    const p = this.#work(subject, key, w)
      .catch((err) =>
        this.#d.logger.error(
          { destinationId: key.destinationId, err: (err as Error).message },
          "ordered worker failed",
        ),
      )
      .finally(() => {
        this.#workers.delete(subject);
        this.#running.delete(p);
      });
    this.#running.add(p);
  }

  /** One user's calls, head after head, until none is stored or the partition is not ours. */
  async #work(subject: string, key: OrderedKey, w: Worker): Promise<void> {
    const d = this.#d;
    const stop = this.#stop.signal;
    /** Attempts made here per stored message (after a takeover it starts again; the window does not). */
    const attempts = new Map<number, number>();
    const view = new SubjectView(this.#heads, subject);
    let rechecks = 0;
    let laters = 0;
    while (!stop.aborted && this.#owned.has(key.q)) {
      let head: StoredMsg | undefined | "later";
      let readAt: number;
      try {
        head = await this.#pick(view);
        readAt = performance.now();
      } catch (err) {
        d.logger.warn(
          { destinationId: key.destinationId, err: (err as Error).message },
          "reading an ordered head failed",
        );
        await this.#pause(ERROR_PAUSE_MS);
        continue;
      }
      if (head === "later") {
        // Usually answered by the next look; a router that is stuck (backpressure) is polled less.
        if (++laters > 2) await this.#pause(Math.min(1000, 10 * 2 ** (laters - 3)));
        continue;
      }
      laters = 0;
      if (!head) {
        if (w.kicks === 0 || rechecks >= RECHECK_MS.length) return;
        await this.#pause(RECHECK_MS[rechecks++]!);
        continue;
      }
      w.kicks = 0;
      rechecks = 0;
      const dest = d.store.destination(key.destinationId);
      if (!dest) {
        // Deleted (the purge follows) or created a moment ago elsewhere: wait for the record.
        if (!(await this.#configChange(key.destinationId, UNKNOWN_DESTINATION_WAIT_MS))) return;
        continue;
      }
      if (!dest.enabled) {
        if (await this.#whilePaused(key.destinationId, head)) view.drop(head.seq);
        continue;
      }
      const release = await this.#slots.take(dest, () => d.store.destination(key.destinationId), stop);
      if (!release) return;
      if (performance.now() - readAt > STALE_HEAD_MS) {
        // Two owners (a hand-over; a replica thawed after the others took its partitions over,
        // still owning them in its own view): the other may have delivered this head and the
        // next while this one waited. Sent now, it would arrive after the newer call.
        let still: StoredMsg | undefined;
        try {
          still = await this.#heads.get(head.seq);
        } catch (err) {
          release();
          d.logger.warn(
            { destinationId: key.destinationId, err: (err as Error).message },
            "reading an ordered head failed",
          );
          await this.#pause(ERROR_PAUSE_MS);
          continue;
        }
        if (!still) {
          release();
          attempts.delete(head.seq);
          view.drop(head.seq);
          continue;
        }
      }
      const n = (attempts.get(head.seq) ?? 0) + 1;
      let outcome: Awaited<ReturnType<typeof attemptHead>>;
      try {
        // Read again after the wait for a slot: URLs, secret or a pause may have changed.
        const now = d.store.destination(key.destinationId);
        if (!now?.enabled || !this.#owned.has(key.q)) continue;
        outcome = await attemptHead(d, now, head, n, this.#abort.signal);
      } finally {
        release();
      }
      switch (outcome.kind) {
        case "delivered":
        case "dead":
          attempts.delete(head.seq);
          if (!(await this.#remove(head.seq))) return;
          view.drop(head.seq);
          break;
        case "aborted":
          return;
        case "paused":
          await this.#configChange(key.destinationId, PAUSE_SEEN_WAIT_MS);
          break;
        case "retry":
          attempts.set(head.seq, n);
          // This user's timer alone: the destination's other users go on meanwhile.
          await this.#pause(outcome.delayMs);
          break;
        case "dead_failed":
          attempts.set(head.seq, n);
          await this.#pause(DEAD_WRITE_PAUSE_MS);
          break;
      }
    }
  }

  /**
   * A paused destination's head waits (unsent) until the destination is enabled again, and is
   * dead-lettered once it has waited the whole retry window, like the janitor does with DELIVERIES.
   */
  async #whilePaused(destinationId: string, head: StoredMsg): Promise<boolean> {
    const d = this.#d;
    const expiresAt = head.time.getTime() + d.policy.windowMs;
    const left = expiresAt - Date.now();
    if (left > 0) {
      await this.#configChange(destinationId, left);
      return false;
    }
    const reason = "destination disabled for the whole retry window";
    if (await deadLetterHead(d, destinationId, head, 0, [], reason, "disabled"))
      return this.#remove(head.seq);
    await this.#pause(DEAD_WRITE_PAUSE_MS);
    return false;
  }

  /**
   * The call to send next on a user's subject: the stored one accepted first, once every call
   * accepted before it has been routed (so none of them can still appear behind it). "later":
   * not yet known, look again (the router's floor is re-read at most every 20 ms).
   */
  async #pick(view: SubjectView): Promise<StoredMsg | undefined | "later"> {
    const since = performance.now();
    await view.refresh();
    const first = view.first();
    if (!first) return undefined;
    if (
      first.eventSeq > 0 &&
      !view.proven(first.eventSeq, since) &&
      !(await this.#floor.reached(first.eventSeq, since))
    ) {
      // The floor can stay low for long (an event whose ack was lost is redelivered after the
      // router's ack wait, 30 s): after a while, look at what is still unrouted before this call.
      const now = performance.now();
      view.waitingSince ??= now;
      if (now - view.waitingSince > STUCK_FLOOR_MS) {
        const hash = view.subject.slice(view.subject.lastIndexOf(".") + 1);
        if (await this.#floor.noneOfUser(hash, first.eventSeq)) view.prove(first.eventSeq, performance.now());
      }
      return "later";
    }
    view.waitingSince = undefined;
    const head = await this.#heads.get(first.seq);
    if (head) return head;
    // Deleted meanwhile (another owner during a hand-over, a purge, max age).
    view.drop(first.seq);
    return "later";
  }

  /**
   * Deletes a head that was delivered or dead-lettered, trying again while NATS is away (the
   * next head must not be read before). False when shutdown's grace ended first: the head stays
   * and is sent again by the next owner (a duplicate, never a reordering).
   */
  async #remove(seq: number): Promise<boolean> {
    for (;;) {
      try {
        await this.#heads.remove(seq);
        return true;
      } catch (err) {
        this.#d.logger.warn({ seq, err: (err as Error).message }, "deleting a delivered ordered call failed");
        if (this.#abort.signal.aborted) return false;
        await sleep(ERROR_PAUSE_MS, undefined, { signal: this.#abort.signal }).catch(() => {});
      }
    }
  }

  /** Resolves after `ms`, or at once on shutdown. */
  async #pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.#stop.signal }).catch(() => {});
  }

  /** True when the destination's configuration changed within `ms` (false: time ran out or shutdown). */
  #configChange(destinationId: string, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const waiters = this.#configWaiters.get(destinationId) ?? new Set();
      this.#configWaiters.set(destinationId, waiters);
      const done = (changed: boolean) => {
        clearTimeout(timer);
        this.#stop.signal.removeEventListener("abort", onStop);
        waiters.delete(wake);
        if (waiters.size === 0 && this.#configWaiters.get(destinationId) === waiters)
          this.#configWaiters.delete(destinationId);
        resolve(changed);
      };
      const wake = () => done(true);
      const onStop = () => done(false);
      const timer = setTimeout(() => done(false), Math.min(MAX_TIMER_MS, Math.max(0, ms)));
      waiters.add(wake);
      this.#stop.signal.addEventListener("abort", onStop, { once: true });
    });
  }
}
