import {
  deleteMessages,
  isAlreadyDeleted,
  isNotFound,
  ORDERED_STREAM,
  ORDERED_SUBJECT_PREFIX,
  orderedDestinationFilter,
  orderedPartitionFilter,
} from "@hookpost/core";
import type { JetStreamManager, StoredMsg } from "nats";

/** Where an ordered subject `hookpost.ordered.<q>.<dest>.<userhash>` points. */
export interface OrderedKey {
  q: number;
  destinationId: string;
}

export function parseOrderedSubject(subject: string): OrderedKey | undefined {
  if (!subject.startsWith(ORDERED_SUBJECT_PREFIX)) return undefined;
  const parts = subject.slice(ORDERED_SUBJECT_PREFIX.length).split(".");
  if (parts.length !== 3) return undefined;
  const q = Number(parts[0]);
  if (!Number.isInteger(q) || q < 0 || !parts[1]) return undefined;
  return { q, destinationId: parts[1] };
}

/**
 * What the ordered worker reads and removes on HOOKPOST_ORDERED. Nothing here holds state: the
 * stream is the truth (what is stored on a subject is exactly what that user is still owed).
 */
export class HeadStore {
  readonly #jsm: JetStreamManager;

  constructor(jsm: JetStreamManager) {
    this.#jsm = jsm;
  }

  /**
   * The first message stored on `subject` at or after sequence `from` (undefined: none).
   * `next_by_subj` is answered by the stream leader from its own store, so it never lags a delete.
   */
  async next(subject: string, from: number): Promise<StoredMsg | undefined> {
    // nats.js types the query as {seq} | {last_by_subj}; the server also takes next_by_subj.
    return this.#get({ seq: from, next_by_subj: subject } as unknown as { seq: number });
  }

  /** The message stored at `seq` (undefined: deleted meanwhile). */
  async get(seq: number): Promise<StoredMsg | undefined> {
    return this.#get({ seq });
  }

  async #get(query: { seq: number }): Promise<StoredMsg | undefined> {
    try {
      return await this.#jsm.streams.getMessage(ORDERED_STREAM, query);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Removes a delivered or dead-lettered head; already gone (another owner did it) is fine. */
  async remove(seq: number): Promise<void> {
    try {
      // No erase: overwriting the bytes costs a write per call for nothing we need.
      await this.#jsm.streams.deleteMessage(ORDERED_STREAM, seq, false);
    } catch (err) {
      if (!isAlreadyDeleted(err)) throw err;
    }
  }

  /** Subjects of partition `q` (every partition: undefined) that hold messages, with their counts. */
  async subjects(q?: number): Promise<Record<string, number>> {
    return this.#subjects(q === undefined ? `${ORDERED_SUBJECT_PREFIX}>` : orderedPartitionFilter(q));
  }

  /** Calls waiting for one destination. */
  async pending(q: number, destinationId: string): Promise<number> {
    const subjects = await this.#subjects(orderedDestinationFilter(q, destinationId));
    return Object.values(subjects).reduce((a, b) => a + b, 0);
  }

  /** Drops every call waiting for a deleted destination (one by one: core's deleteMessages says why). */
  async purge(q: number, destinationId: string): Promise<number> {
    return deleteMessages(this.#jsm, ORDERED_STREAM, orderedDestinationFilter(q, destinationId));
  }

  async #subjects(filter: string): Promise<Record<string, number>> {
    const info = await this.#jsm.streams.info(ORDERED_STREAM, { subjects_filter: filter });
    return info.state.subjects ?? {};
  }
}
