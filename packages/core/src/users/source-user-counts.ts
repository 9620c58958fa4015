import type { JetStreamManager, KV } from "nats";
import { deleteMessages } from "../nats/delete-messages.js";
import { isWrongLastSequence } from "../nats/jetstream-errors.js";
import { kvKeySubject, USER_SOURCES_BUCKET, USER_SOURCES_STREAM } from "../nats/topology.js";

/** How often what this replica added is written to the shared counters, and active ones reread. */
const FLUSH_EVERY_MS = 1_000;
/** A source whose count was asked within this long has its counter reread at each flush. */
const ACTIVE_FOR_MS = 60_000;
/** Compare-and-set attempts per counter and flush; the rest waits for the next flush. */
const CAS_TRIES = 3;

/** The counter key of a source: two tokens, so no pair key (`u.<id>.<source>`) can be one. */
export const userCountKey = (sourceId: string) => `n.${sourceId}`;

/**
 * How many users each source has in the user index, shared by every replica: one counter key per
 * source in the index's own bucket (`n.<sourceId>`). Counting the pairs themselves would walk
 * millions of keys; instead each replica adds the pairs it wrote (and takes off the ones it
 * forgot) to the counter every second, with compare-and-set.
 *
 * An approximation, like the pending-bytes quota: a source's count lags what other replicas wrote
 * within one flush, and a replica killed before its flush loses at most that second of counts.
 */
export class SourceUserCounts {
  readonly #kv: KV;
  readonly #jsm: JetStreamManager;
  /** The counter as last read or written here, with when its count was last asked. */
  readonly #known = new Map<string, { total: number; askedAt: number }>();
  /** Pairs added (or, negative, forgotten) here and not yet in the counter. */
  readonly #delta = new Map<string, number>();
  /** Places taken by writes under way here: concurrent new users see each other. */
  readonly #reserved = new Map<string, number>();
  readonly #reading = new Map<string, Promise<number>>();
  /**
   * Sources last read here without a counter: what this replica wrote meanwhile is among the
   * pairs the first counter is made of (by whichever replica makes it), not to be added again.
   */
  readonly #uncounted = new Set<string>();
  /** Told when a place of the source is given back. */
  readonly #waiting = new Map<string, (() => void)[]>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #closed = false;

  constructor(kv: KV, jsm: JetStreamManager) {
    this.#kv = kv;
    this.#jsm = jsm;
  }

  /** The source's users as far as this replica knows (reads its counter the first time). */
  async count(sourceId: string): Promise<number> {
    const known = this.#known.get(sourceId);
    const total = known ? known.total : await this.#firstRead(sourceId);
    const entry = this.#known.get(sourceId);
    if (entry) entry.askedAt = Date.now();
    this.#schedule();
    return this.#users(sourceId, entry?.total ?? total);
  }

  /**
   * Takes a place for one new user when the source has fewer than `max`; `settle` must follow.
   * Resolves with the users counted, that place included when taken.
   */
  async reserve(sourceId: string, max: number): Promise<{ taken: boolean; users: number }> {
    await this.count(sourceId);
    // Counted again, checked and taken in one turn: concurrent writes (a batch, a sync) each
    // see the places the others took.
    const users = this.#users(sourceId, this.#known.get(sourceId)?.total ?? 0);
    if (users >= max) return { taken: false, users };
    this.#reserved.set(sourceId, (this.#reserved.get(sourceId) ?? 0) + 1);
    return { taken: true, users: users + 1 };
  }

  /** Gives back a place `reserve` took; counts the pair when it was written. */
  settle(sourceId: string, written: boolean): void {
    const left = (this.#reserved.get(sourceId) ?? 1) - 1;
    if (left > 0) this.#reserved.set(sourceId, left);
    else this.#reserved.delete(sourceId);
    if (written) this.add(sourceId, 1);
    const waiting = this.#waiting.get(sourceId);
    this.#waiting.delete(sourceId);
    for (const wake of waiting ?? []) wake();
  }

  /**
   * Resolves when a write under way here gives back a place of the source (it may have been a
   * known user's, refused by the server); undefined when none is held.
   */
  placeGivenBack(sourceId: string): Promise<void> | undefined {
    if (!this.#reserved.get(sourceId)) return undefined;
    return new Promise((resolve) => {
      const waiting = this.#waiting.get(sourceId) ?? [];
      waiting.push(resolve);
      this.#waiting.set(sourceId, waiting);
    });
  }

  /** Counts `n` pairs written (or, negative, forgotten) here. */
  add(sourceId: string, n: number): void {
    this.#delta.set(sourceId, (this.#delta.get(sourceId) ?? 0) + n);
    this.#schedule();
  }

  /** The source is gone: its counter is deleted. */
  async drop(sourceId: string): Promise<void> {
    this.#known.delete(sourceId);
    this.#delta.delete(sourceId);
    await deleteMessages(
      this.#jsm,
      USER_SOURCES_STREAM,
      kvKeySubject(USER_SOURCES_BUCKET, userCountKey(sourceId)),
    );
  }

  /** Writes what is counted here now (tests; close). */
  flush(): Promise<void> {
    this.#flushing ??= this.#flush().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /** Writes what is counted here, and plans no more flushes. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.flush().catch(() => {});
    // A flush under way when closing may have started before the last counts.
    if (this.#delta.size > 0) await this.flush().catch(() => {});
  }

  #users(sourceId: string, total: number): number {
    return Math.max(0, total + (this.#delta.get(sourceId) ?? 0) + (this.#reserved.get(sourceId) ?? 0));
  }

  #firstRead(sourceId: string): Promise<number> {
    let p = this.#reading.get(sourceId);
    if (!p) {
      p = this.#read(sourceId)
        .then(({ total }) => {
          this.#known.set(sourceId, { total, askedAt: Date.now() });
          return total;
        })
        .finally(() => this.#reading.delete(sourceId));
      this.#reading.set(sourceId, p);
    }
    return p;
  }

  /**
   * The counter, or (revision 0) when there is none yet the pairs the source has in the index,
   * counted once: users stored before the quota existed (an upgrade), or by a replica that never
   * flushed, are users all the same.
   */
  async #read(sourceId: string): Promise<{ total: number; revision: number }> {
    const e = await this.#kv.get(userCountKey(sourceId));
    if (e?.operation !== "PUT") {
      this.#uncounted.add(sourceId);
      return { total: await this.#pairs(sourceId), revision: 0 };
    }
    const total = Number(e.string());
    return { total: Number.isSafeInteger(total) && total > 0 ? total : 0, revision: e.revision };
  }

  /** The source's pairs in the index, from the server's per-subject counts. */
  async #pairs(sourceId: string): Promise<number> {
    const info = await this.#jsm.streams.info(USER_SOURCES_STREAM, {
      subjects_filter: kvKeySubject(USER_SOURCES_BUCKET, `*.*.${sourceId}`),
    });
    return Object.keys(info.state.subjects ?? {}).length;
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.flush().catch(() => {});
    }, FLUSH_EVERY_MS).unref();
  }

  async #flush(): Promise<void> {
    const now = Date.now();
    const sources = new Set(this.#delta.keys());
    for (const [id, k] of this.#known) {
      if (now - k.askedAt < ACTIVE_FOR_MS) sources.add(id);
      else this.#known.delete(id);
    }
    let failed: unknown;
    for (const sourceId of sources) {
      try {
        await this.#flushOne(sourceId);
      } catch (err) {
        failed ??= err;
      }
    }
    // Still counting, or still asked: keep going.
    if (this.#delta.size > 0 || this.#known.size > 0) this.#schedule();
    if (failed) throw failed;
  }

  async #flushOne(sourceId: string): Promise<void> {
    for (let i = 0; i < CAS_TRIES; i++) {
      const uncounted = this.#uncounted.has(sourceId);
      const { total, revision } = await this.#read(sourceId);
      const d = this.#delta.get(sourceId) ?? 0;
      let written = total;
      if (uncounted && revision !== 0) {
        // Another replica made the counter from the pairs, this replica's among them.
        this.#uncounted.delete(sourceId);
        this.#taken(sourceId, d);
      } else if (d !== 0 || (revision === 0 && total > 0)) {
        // No counter yet: `total` counted the pairs themselves, this replica's included.
        written = revision === 0 ? total : Math.max(0, total + d);
        try {
          if (revision === 0) await this.#kv.create(userCountKey(sourceId), String(written));
          else await this.#kv.update(userCountKey(sourceId), String(written), revision);
        } catch (err) {
          // Another replica wrote first: read again.
          if (isWrongLastSequence(err)) continue;
          throw err;
        }
        this.#uncounted.delete(sourceId);
        this.#taken(sourceId, d);
      }
      const k = this.#known.get(sourceId);
      if (k) k.total = written;
      return;
    }
  }

  /** `d` of the source's delta is in the counter now. */
  #taken(sourceId: string, d: number): void {
    const left = (this.#delta.get(sourceId) ?? 0) - d;
    if (left === 0) this.#delta.delete(sourceId);
    else this.#delta.set(sourceId, left);
  }
}
