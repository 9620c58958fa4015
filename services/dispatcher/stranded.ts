import type { Logger } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  isNotFound,
  nextMessage,
  partitionConsumer,
  partitionFilter,
} from "@hookpost/core";
import type { ConsumerInfo, JetStreamClient, JetStreamManager } from "nats";
import {
  type ConsumerSettings,
  deleteConsumer,
  ensureConsumer,
  partitionConsumerConfig,
} from "./consumers.js";
import { restoreUncounted, uncounted } from "./restore.js";

/**
 * Stranded deliveries (docs/design/delivery-at-scale.md §7). nats-server 2.9 was seen, after a
 * leader change or a frozen node, to keep messages in a work-queue stream that their consumer no
 * longer counts: below its ack floor, or neither pending nor unacknowledged. Nothing would ever
 * hand them out, so accepted calls would never be delivered. A consumer is compared with what its
 * subjects store; when they disagree on two looks in a row about the same oldest message, what
 * the consumer passed without counting is stored again (restore.ts: its replica may lack it), or,
 * when nothing passed is missing, the consumer is deleted and created again, which hands out
 * everything stored from the oldest on. What was in flight then may come twice; nothing is lost.
 */

/** What one look saw of a consumer that did not count everything its subjects store. */
export interface Suspicion {
  /** The oldest stored message at the first look. */
  firstSeq: number;
  /** When the mismatch was first seen (ms). */
  sinceMs: number;
}

export interface Look {
  /** The consumer, read after `stored`. */
  info: ConsumerInfo;
  /** Messages stored on the consumer's subjects. */
  stored: number;
  /** Sequence of the oldest of them (0: none). */
  firstSeq: number;
  nowMs: number;
}

/**
 * The verdict on one look, given the last one's suspicion: `recreate` when the consumer lost
 * messages, else the suspicion to keep (undefined: all counted).
 *
 * Stored is read before the consumer, so a call stored meanwhile is counted by the consumer too;
 * one acked meanwhile makes `stored` look high for a moment, hence two looks. The oldest message
 * is certainly lost when the consumer counts it as acknowledged (at or below the ack floor),
 * delivered with nothing unacknowledged, or not delivered with nothing pending: a second look at
 * the same message recreates. Otherwise (it may be a delivery held right now) the mismatch must
 * last `holdLimitMs`, longer than any delivery is held.
 */
export function verdict(
  last: Suspicion | undefined,
  look: Look,
  holdLimitMs: number,
): { recreate: true } | { recreate: false; suspicion: Suspicion | undefined } {
  const c = look.info;
  if (look.firstSeq === 0 || look.stored <= c.num_pending + c.num_ack_pending) {
    return { recreate: false, suspicion: undefined };
  }
  if (!last || last.firstSeq !== look.firstSeq) {
    return { recreate: false, suspicion: { firstSeq: look.firstSeq, sinceMs: look.nowMs } };
  }
  if (uncounted(look.firstSeq, c) || look.nowMs - last.sinceMs >= holdLimitMs) return { recreate: true };
  return { recreate: false, suspicion: last };
}

/** How long a delivery may be held at most before the mismatch it causes counts as lost. */
export function holdLimit(ackWaitMs: number): number {
  return Math.max(60_000, 3 * ackWaitMs);
}

/**
 * The suspicions and turns of a set of consumers (the partitions', the lanes'), by key: what to do
 * after a look at one. Storing again helps when the consumer's replica lacks what it passed;
 * creating the consumer again when its state is wrong. The two take turns until the consumer
 * counts everything.
 */
export class StrandedTurns<K> {
  readonly #suspicions = new Map<K, Suspicion>();
  /** Consumers whose last recovery stored deliveries again: if that did not help, the next creates the consumer again. */
  readonly #restored = new Set<K>();

  /** Forgets what was seen of `key`'s consumer (gone, or no longer looked at). */
  forget(key: K): void {
    this.#suspicions.delete(key);
    this.#restored.delete(key);
  }

  /** Forgets every consumer but those `keep` says. */
  keepOnly(keep: (key: K) => boolean): void {
    for (const key of this.#suspicions.keys()) if (!keep(key)) this.#suspicions.delete(key);
    for (const key of this.#restored) if (!keep(key)) this.#restored.delete(key);
  }

  /**
   * After a look at `key`'s consumer: undefined when nothing is to be done, the number of
   * deliveries `restore` stored again (its turn), or `recreate` (the other turn: the caller
   * deletes the consumer and creates it again).
   */
  async next(
    key: K,
    look: Look,
    holdLimitMs: number,
    restore: () => Promise<number>,
  ): Promise<number | "recreate" | undefined> {
    const v = verdict(this.#suspicions.get(key), look, holdLimitMs);
    if (!v.recreate) {
      if (v.suspicion) this.#suspicions.set(key, v.suspicion);
      else this.#suspicions.delete(key);
      // A consumer may count copies for a moment and then skip them: the turn ends with the backlog.
      if (look.firstSeq === 0) this.#restored.delete(key);
      return undefined;
    }
    this.#suspicions.delete(key);
    const restored = this.#restored.delete(key) ? 0 : await restore();
    if (restored === 0) return "recreate";
    this.#restored.add(key);
    return restored;
  }
}

export interface StrandedDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  logger: Logger;
  partitions: number;
  consumer: ConsumerSettings;
  /** How often each partition is looked at (STRANDED_CHECK_INTERVAL). */
  intervalMs: number;
  /** Told of each consumer created again (hookpost_dispatcher_stranded_recreated_total). */
  onRecreated?: () => void;
}

/** The partitions' check, run every intervalMs (housekeeping.ts); lanes are checked by their sweep (lanes.ts) with the same verdict. */
export class StrandedRescue {
  readonly #d: StrandedDeps;
  readonly #turns = new StrandedTurns<number>();

  constructor(deps: StrandedDeps) {
    this.#d = deps;
  }

  /** One look at every partition; returns how many consumers were created again. */
  async run(): Promise<number> {
    let recreated = 0;
    for (let p = 0; p < this.#d.partitions; p++) if (await this.#check(p)) recreated++;
    return recreated;
  }

  async #check(p: number): Promise<boolean> {
    const d = this.#d;
    const name = partitionConsumer(p);
    const look = await lookAt(d.jsm, name, partitionFilter(p));
    if (!look) {
      // Gone (a recreation that failed halfway, or deleted by hand): nothing would pull it.
      this.#turns.forget(p);
      await ensureConsumer(d.jsm, partitionConsumerConfig(p, d.consumer));
      d.logger.warn({ consumer: name }, "a partition consumer was missing; created again");
      return true;
    }
    const next = await this.#turns.next(p, look, holdLimit(d.consumer.ackWaitMs), () =>
      restoreUncounted(d, partitionFilter(p), look.info),
    );
    if (next === undefined) return false;
    if (next !== "recreate") {
      d.onRecreated?.();
      d.logger.warn(
        { consumer: name, restored: next, ...lookFields(look) },
        "stranded deliveries: the consumer passed messages its partition stores without counting them; stored again",
      );
      return true;
    }
    // Another replica may have done it a moment ago: a consumer younger than two looks is left alone.
    if (Date.now() - new Date(look.info.created).getTime() < 2 * d.intervalMs) return false;
    await deleteConsumer(d.jsm, name);
    await ensureConsumer(d.jsm, partitionConsumerConfig(p, d.consumer));
    d.onRecreated?.();
    d.logger.warn(
      { consumer: name, ...lookFields(look) },
      "stranded deliveries: the consumer no longer counted what its partition stores; created again",
    );
    return true;
  }
}

/** Both views of a look, for the warning a recreation logs. */
export function lookFields(look: Look) {
  return {
    stored: look.stored,
    pending: look.info.num_pending,
    unacknowledged: look.info.num_ack_pending,
    firstSeq: look.firstSeq,
    ackFloor: look.info.ack_floor.stream_seq,
    delivered: look.info.delivered.stream_seq,
  };
}

/** One look at a consumer and what its filter stores; undefined when the consumer is gone. */
export async function lookAt(
  jsm: JetStreamManager,
  consumer: string,
  filter: string,
  stored?: number,
): Promise<Look | undefined> {
  let count = stored;
  if (count === undefined) {
    const s = await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
    count = 0;
    for (const n of Object.values(s.state.subjects ?? {})) count += n;
  }
  let info: ConsumerInfo;
  try {
    info = await jsm.consumers.info(DELIVERIES_STREAM, consumer);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  const first = count > 0 ? await nextMessage(jsm, DELIVERIES_STREAM, filter, 1) : undefined;
  return { info, stored: count, firstSeq: first?.seq ?? 0, nowMs: Date.now() };
}
