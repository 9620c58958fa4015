import type { Logger } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  destinationOfSubject,
  isAlreadyDeleted,
  isNotFound,
  MESSAGE_ID_HEADER,
  nextMessage,
  partitionConsumer,
  partitionFilter,
  SOURCE_ID_HEADER,
} from "@hookpost/core";
import type { ConsumerInfo, JetStreamManager, StoredMsg, StreamInfo } from "nats";
import {
  type ConsumerSettings,
  deleteConsumer,
  ensureConsumer,
  partitionConsumerConfig,
} from "./consumers.js";
import { type Parking, stateOf } from "./parking.js";

/**
 * Stranded deliveries (docs/design/delivery-at-scale.md §7). nats-server 2.9 was seen, after a
 * leader change or a frozen node, to keep messages in a work-queue stream that their consumer no
 * longer counts: below its ack floor, or neither pending nor unacknowledged. Nothing would ever
 * hand them out, so accepted calls would never be delivered. A consumer is compared with what its
 * subjects store; when they disagree on two looks in a row about the same oldest message, what
 * lies at or below its ack floor is moved (parked on its lane as a new message, then deleted; one
 * the attempt log shows delivered already is only deleted), and a consumer that lost count of
 * anything else is created again. A recreated consumer was seen to start above a stranded
 * message, which is why those are moved rather than handed out again.
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
  /** The stream's last sequence when `stored` was read: a message stored later is not judged. */
  lastSeq: number;
  /**
   * Every replica of the stream was current (caught up, online) when `stored` was read. A delete
   * by sequence that reaches a replica still catching up past its last message makes nats-server
   * 2.9.10 reset that replica's stream (seen: DELIVERIES "not found" for minutes), so moves wait.
   */
  replicasCurrent: boolean;
  nowMs: number;
}

/**
 * The verdict on one look, given the last one's suspicion: `rescue` when the consumer lost
 * messages (`held`: found by the hold limit, not by a message it certainly cannot hand out), else
 * the suspicion to keep (undefined: all counted).
 *
 * Stored is read before the consumer, so a call stored meanwhile is counted by the consumer too;
 * one acked meanwhile makes `stored` look high for a moment, hence two looks. The oldest message
 * is certainly lost when the consumer counts it as acknowledged (at or below the ack floor),
 * delivered with nothing unacknowledged, or not delivered with nothing pending: a second look at
 * the same message rescues. Otherwise (it may be a delivery held right now) the mismatch must
 * last `holdLimitMs`, longer than any delivery is held.
 */
export function verdict(
  last: Suspicion | undefined,
  look: Look,
  holdLimitMs: number,
): { rescue: true; held: boolean } | { rescue: false; suspicion: Suspicion | undefined } {
  const c = look.info;
  if (look.firstSeq === 0 || look.stored <= c.num_pending + c.num_ack_pending) {
    return { rescue: false, suspicion: undefined };
  }
  if (!last || last.firstSeq !== look.firstSeq) {
    return { rescue: false, suspicion: { firstSeq: look.firstSeq, sinceMs: look.nowMs } };
  }
  if (uncounted(look.firstSeq, c)) return { rescue: true, held: false };
  if (look.nowMs - last.sinceMs >= holdLimitMs) return { rescue: true, held: true };
  return { rescue: false, suspicion: last };
}

/**
 * A stored message its consumer will never hand out: at or below the ack floor (counted as
 * acknowledged), delivered with nothing unacknowledged, or not yet delivered with nothing pending.
 */
export function uncounted(seq: number, c: ConsumerInfo): boolean {
  if (seq <= c.ack_floor.stream_seq) return true;
  if (seq <= c.delivered.stream_seq) return c.num_ack_pending === 0;
  return c.num_pending === 0;
}

/**
 * What to do about `stored` (ascending sequences) given consumer `c`'s view. Messages at or
 * below its ack floor are removals the server lost: `move` them (a consumer created again was
 * seen to start above such a message, so recreating would not hand it out). Any other message it
 * does not count (delivered while nothing is unacknowledged, not delivered while nothing is
 * pending, or a mismatch that outlasted the hold limit: `held`) means the consumer lost count:
 * it is created again (`recreate`), which hands out everything stored from the oldest on.
 */
export function strandedOf(
  stored: readonly number[],
  c: ConsumerInfo,
  o: { held: boolean },
): { move: number[]; recreate: boolean } {
  const move: number[] = [];
  let recreate = o.held;
  for (const seq of stored) {
    if (seq <= c.ack_floor.stream_seq) move.push(seq);
    else if (uncounted(seq, c)) recreate = true;
  }
  return { move, recreate };
}

/** How long a delivery may be held at most before the mismatch it causes counts as lost. */
export function holdLimit(ackWaitMs: number): number {
  return Math.max(60_000, 3 * ackWaitMs);
}

/** Messages one rescue reads at most; what it did not reach waits for the next look. */
const SCAN_LIMIT = 5000;
/** Moved message ids a warning names. */
const SAMPLE = 10;
/** Moves in flight at once: gentle on a cluster that is still recovering from what stranded them. */
const MOVES_IN_FLIGHT = 16;

export interface MoverDeps {
  jsm: JetStreamManager;
  parking: Parking;
  /**
   * Whether this replica rescues what consumer `name` stranded: one replica per consumer, so two
   * do not move the same messages at once (each move is a write to a stream still recovering).
   */
  mine: (name: string) => boolean;
  /** Whether the attempt log shows the call delivered to the destination already (false without a log). */
  delivered: (destinationId: string, sourceId: string, messageId: string) => Promise<boolean>;
}

/** What one rescue did: moved to lanes, and deleted because already delivered. */
export interface Moved {
  /** The consumer does not count what it has not delivered: it must be created again. */
  recreate: boolean;
  moved: number;
  deliveredAlready: number;
  /** Moves the lane answered as a copy it had already (another replica moved the same message). */
  duplicates: number;
  /** A few moved message ids, for the warning. */
  sample: string[];
}

/**
 * Moves what one consumer (`look` at it on `filter`) counts as done but its subjects still store
 * to their lanes: each is parked as a new message, then deleted where it was (a crash in between
 * stores it twice at worst), and says whether the consumer lost count of anything else
 * (`recreate`). The copy's id is the delivery's park id and the stranded sequence: a repeated
 * move stores it once, and no earlier park of the delivery can deduplicate it away.
 */
export async function moveStranded(
  d: MoverDeps,
  filter: string,
  look: Look,
  o: { held: boolean },
): Promise<Moved> {
  // What lies at or below the ack floor, and the first message above it (is it counted?).
  const scanned = new Map<number, StoredMsg>();
  for (let seq = look.firstSeq; scanned.size < SCAN_LIMIT; ) {
    const m = await nextMessage(d.jsm, DELIVERIES_STREAM, filter, seq);
    if (!m || m.seq > look.lastSeq) break;
    scanned.set(m.seq, m);
    if (m.seq > look.info.ack_floor.stream_seq) break;
    seq = m.seq + 1;
  }
  const { move: picked, recreate } = strandedOf([...scanned.keys()], look.info, { held: o.held });
  const done: Moved = { recreate, moved: 0, deliveredAlready: 0, duplicates: 0, sample: [] };
  const moveOne = async (seq: number) => {
    const m = scanned.get(seq)!;
    const id = destinationOfSubject(m.subject);
    if (id === undefined) return;
    const messageId = m.header?.get(MESSAGE_ID_HEADER) ?? "";
    const sourceId = m.header?.get(SOURCE_ID_HEADER) ?? "";
    if (messageId !== "" && (await d.delivered(id, sourceId, messageId))) {
      done.deliveredAlready++;
    } else {
      const state = stateOf(m.header, m.time.getTime());
      const parkable = { data: m.data, headers: m.header, seq: m.seq };
      const ack = await d.parking.park(id, parkable, state.attempts, state.dueMs, state, `m${m.seq}`);
      if (ack.duplicate) done.duplicates++;
      done.moved++;
      if (done.sample.length < SAMPLE) done.sample.push(messageId);
    }
    try {
      await d.jsm.streams.deleteMessage(DELIVERIES_STREAM, m.seq, false);
    } catch (err) {
      if (!isAlreadyDeleted(err)) throw err;
    }
  };
  for (let i = 0; i < picked.length; i += MOVES_IN_FLIGHT) {
    await Promise.all(picked.slice(i, i + MOVES_IN_FLIGHT).map(moveOne));
  }
  return done;
}

export interface StrandedDeps {
  jsm: JetStreamManager;
  logger: Logger;
  partitions: number;
  consumer: ConsumerSettings;
  /** How often each partition is looked at (STRANDED_CHECK_INTERVAL). */
  intervalMs: number;
  mover: MoverDeps;
  /** Told of each rescue (hookpost_dispatcher_stranded_total). */
  onRescued?: (done: Moved) => void;
  /** Told of each consumer created again (missing, or with another filter). */
  onRecreated?: () => void;
}

/** The partitions' check; lanes are checked by their sweep (lanes.ts) with the same verdict. */
export class StrandedRescue {
  readonly #d: StrandedDeps;
  readonly #suspicions = new Map<number, Suspicion>();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(deps: StrandedDeps) {
    this.#d = deps;
  }

  start(): void {
    const tick = () => {
      this.#running = this.run()
        .then(() => {})
        .catch((err) => this.#d.logger.warn({ err: (err as Error).message }, "stranded check failed"))
        .finally(() => {
          this.#running = undefined;
          if (this.#timer) this.#timer = setTimeout(tick, this.#d.intervalMs).unref();
        });
    };
    this.#timer = setTimeout(tick, this.#d.intervalMs).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  /** One look at every partition; returns how many deliveries were moved or found delivered. */
  async run(): Promise<number> {
    let n = 0;
    for (let p = 0; p < this.#d.partitions; p++) n += await this.#check(p);
    return n;
  }

  async #check(p: number): Promise<number> {
    const d = this.#d;
    const name = partitionConsumer(p);
    if (!d.mover.mine(name)) {
      this.#suspicions.delete(p);
      return 0;
    }
    const cfg = partitionConsumerConfig(p, d.consumer);
    const look = await lookAt(d.jsm, name, partitionFilter(p));
    if (!look || look.info.config.filter_subject !== cfg.filter_subject) {
      // Gone (deleted by hand, or by an older version's recreation) or changed: nothing would pull
      // what the partition stores. A new consumer hands out everything stored.
      this.#suspicions.delete(p);
      if (look) await deleteConsumer(d.jsm, name);
      await ensureConsumer(d.jsm, cfg);
      d.onRecreated?.();
      d.logger.warn(
        { consumer: name },
        "a partition consumer was missing or had another filter; created again",
      );
      return 0;
    }
    const v = verdict(this.#suspicions.get(p), look, holdLimit(d.consumer.ackWaitMs));
    if (!v.rescue) {
      if (v.suspicion) this.#suspicions.set(p, v.suspicion);
      else this.#suspicions.delete(p);
      return 0;
    }
    // A replica still catching up: the next look, with the suspicion kept.
    if (!look.replicasCurrent) return 0;
    this.#suspicions.delete(p);
    const done = await moveStranded(d.mover, partitionFilter(p), look, { held: v.held });
    d.onRescued?.(done);
    // Another replica may have created it a moment ago: one younger than two looks is left alone.
    const recreate = done.recreate && Date.now() - new Date(look.info.created).getTime() >= 2 * d.intervalMs;
    if (recreate) {
      await deleteConsumer(d.jsm, name);
      await ensureConsumer(d.jsm, cfg);
      d.onRecreated?.();
    }
    d.logger.warn(
      { consumer: name, ...lookFields(look), ...done, recreate },
      recreate
        ? "stranded deliveries: the consumer no longer counted what its partition stores; moved what it had delivered, created it again"
        : "stranded deliveries: the consumer no longer counted what its partition stores; moved to their lanes",
    );
    return done.moved + done.deliveredAlready;
  }
}

/** Both views of a look, for the warning a rescue logs. */
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

/** What a stream info says a look needs: stored count on the filter, last sequence, replicas caught up. */
export function storedOf(info: StreamInfo): { count: number; lastSeq: number; replicasCurrent: boolean } {
  let count = 0;
  for (const n of Object.values(info.state.subjects ?? {})) count += n;
  const replicas = info.cluster?.replicas ?? [];
  return {
    count,
    lastSeq: info.state.last_seq,
    replicasCurrent: replicas.every((r) => r.current && !r.offline),
  };
}

/** One look at a consumer and what its filter stores; undefined when the consumer is gone. */
export async function lookAt(
  jsm: JetStreamManager,
  consumer: string,
  filter: string,
  stored?: ReturnType<typeof storedOf>,
): Promise<Look | undefined> {
  const s = stored ?? storedOf(await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter }));
  let info: ConsumerInfo;
  try {
    info = await jsm.consumers.info(DELIVERIES_STREAM, consumer);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  const first = s.count > 0 ? await nextMessage(jsm, DELIVERIES_STREAM, filter, 1) : undefined;
  return {
    info,
    stored: s.count,
    firstSeq: first?.seq ?? 0,
    lastSeq: s.lastSeq,
    replicasCurrent: s.replicasCurrent,
    nowMs: Date.now(),
  };
}
