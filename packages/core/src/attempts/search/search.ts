import { PageBudget } from "@hookpost/contract";
import type { JetStreamManager, StoredMsg } from "nats";
import { ATTEMPTS_STREAM } from "../../nats/topology.js";
import { type LogRecord, type RoutedRecord, type Stored, storedRecordsOf } from "../record.js";
import { type AttemptIndex, getBySequence, type Unit } from "./attempt-index.js";
import { type Indexed, indexedOf, type LogEntry, splitKey } from "./entries.js";
import { Plan, type SearchFilter } from "./plan.js";
import {
  CHUNK_BYTES,
  eventsOf,
  inTime,
  L0_KEY_BYTES,
  L1_KEY_BYTES,
  lookupKey,
  type Postings,
  readOffsets,
  type SegmentHeader,
  type Tuple,
  tuplesOf,
  WILDCARD_EVENT,
} from "./segment.js";

/**
 * Where a page ends: the entries still to come are those of records below `seq`, and those of
 * record `seq` after entry `k`. New records get higher sequences, so a cursor never shifts.
 */
export interface Cursor {
  seq: number;
  k: number;
}
/** `k` past any entry: the whole record `seq` is done. */
export const RECORD_DONE = 1 << 30;

export interface SearchHit {
  record: Stored<LogRecord>;
  /** Which of the record's entries (a routing record may yield several). */
  index: number;
  /** The entry (search); absent in message lookups of a record without entries (a routing record). */
  entry?: LogEntry;
  /** The record's time (ms). */
  time: number;
}

export interface SearchPage {
  /** Newest first. */
  hits: SearchHit[];
  /** Undefined when nothing older matches. */
  next?: Cursor;
  /** The newest records this replica had not indexed yet: not searched. */
  unindexed: number;
}

export interface SearchOptions {
  pageSize: number;
  /** Continue after a previous page. */
  after?: Cursor;
  /** The page stops before its hits exceed this many answer bytes (one hit always fits). */
  maxBytes?: number;
  /** Answer bytes of one hit (0 when unset). */
  bytes?: (hit: SearchHit) => number;
  /** Stream reads one page may make; past them the page ends early, with a cursor. */
  maxReads?: number;
  /**
   * A page ends early (with a cursor) once reading has taken this long: reading old records costs
   * nats-server a block load each, and an interactive search answers with what it found so far.
   */
  deadlineMs?: number;
}

/** Stream reads one page makes at most (index data and records): a page ends early rather than runs long. */
export const MAX_READS = 5000;
/** Records read at once. */
const FETCH_WINDOW = 32;
/** Records of one message GetMessage reads at most (the newest kept). */
export const MESSAGE_RECORDS_MAX = 2000;
/** Segments a routing-record lookup (body join, dead-letter body) visits at most. */
const ROUTED_UNITS = 64;
/**
 * A query first waits this long at most for the index to fold in what the log held when it
 * started (normally milliseconds behind): what was stored just before is found. Past it, the
 * answer says how many records it could not search.
 */
const CATCH_UP_MS = 1000;

/**
 * Answers searches over the attempt log from its index (docs/design/attempt-search.md section
 * 5): segments are chosen by their facet tables (in memory), candidates are read from postings
 * or keys, and records are read by sequence and checked against every filter. Also the message
 * lookups of GetMessage, the body join of ListAttempts and the dead-letter body.
 */
export class AttemptSearch {
  readonly #jsm: JetStreamManager;
  readonly #index: AttemptIndex;
  readonly #tuples = new WeakMap<SegmentHeader, Tuple[]>();

  constructor(jsm: JetStreamManager, index: AttemptIndex) {
    this.#jsm = jsm;
    this.#index = index;
  }

  get index(): AttemptIndex {
    return this.#index;
  }

  async search(filter: SearchFilter, o: SearchOptions): Promise<SearchPage> {
    const plan = new Plan(filter);
    return this.#walk(plan, o, (r, ix) =>
      plan.matches(r, ix).map((i) => ({ index: i, entry: ix.entries[i]! })),
    );
  }

  /**
   * Every record about one message (routing, attempts, dead letters), oldest first; only the
   * given source's when `sourceId` is set. At most MESSAGE_RECORDS_MAX, the newest.
   */
  async forMessage(messageId: string, sourceId?: string): Promise<{ records: Stored[]; truncated: boolean }> {
    const plan = new Plan({ messageId });
    const page = await this.#walk(
      plan,
      { pageSize: MESSAGE_RECORDS_MAX, maxReads: Number.MAX_SAFE_INTEGER },
      (r) => (r.messageId === messageId && (!sourceId || r.sourceId === sourceId) ? [{ index: 0 }] : []),
    );
    // A message may hold two records (a direct delivery's routing and attempt): both, in that order.
    const records = page.hits
      .flatMap((h) => storedRecordsOf(h.record))
      .sort((a, b) => a.sequence - b.sequence);
    return { records, truncated: page.next !== undefined };
  }

  /**
   * The routing records of one call (source and message id) near where it is expected: the
   * sequence of one of its attempts, or a time (a dead letter's first attempt). Segments are read
   * outwards from there, and the search stops at the first segment holding one. Oldest first.
   */
  async routedOf(
    sourceId: string,
    messageId: string,
    near: { seq?: number; timeMs?: number } = {},
  ): Promise<Stored<RoutedRecord>[]> {
    const plan = new Plan({ messageId });
    const last = (await this.#jsm.streams.info(ATTEMPTS_STREAM)).state.last_seq;
    await this.#index.caughtUp(last, CATCH_UP_MS);
    const units = this.#index.units();
    const from =
      near.seq !== undefined
        ? units.findIndex((u) => u.lo <= near.seq!)
        : near.timeMs !== undefined
          ? units.findIndex((u) => u.tMax >= u.tMin && u.tMin <= near.timeMs!)
          : 0;
    const at = Math.max(0, from);
    // That segment and the next newer one (the router and the dispatcher write without waiting),
    // then older ones (a routing record is written before its attempts, mostly), then newer.
    const order = [
      ...units.slice(Math.max(0, at - 1), at + 1).reverse(),
      ...units.slice(at + 1),
      ...units.slice(0, Math.max(0, at - 1)).reverse(),
    ].slice(0, ROUTED_UNITS);
    const l1 = new Map<number, number[]>();
    for (const u of order) {
      const seqs = await this.#candidates(u, plan, l1);
      const found: Stored<RoutedRecord>[] = [];
      for (const m of await this.#fetch(seqs)) {
        if (!m) continue;
        const stored = parseStored(m);
        for (const r of stored ? storedRecordsOf(stored) : []) {
          if (r.kind === "routed" && r.messageId === messageId && r.sourceId === sourceId) found.push(r);
        }
      }
      if (found.length > 0) return found.sort((a, b) => a.sequence - b.sequence);
    }
    return [];
  }

  /**
   * Reads units newest first; `accept` says which entries of a record are hits. Records are read
   * FETCH_WINDOW at a time, newest first, so that a dense filter stops after about one page.
   */
  async #walk(
    plan: Plan,
    o: SearchOptions,
    accept: (r: Stored<LogRecord>, ix: Indexed) => { index: number; entry?: LogEntry }[],
  ): Promise<SearchPage> {
    const state = (await this.#jsm.streams.info(ATTEMPTS_STREAM)).state;
    await this.#index.caughtUp(state.last_seq, CATCH_UP_MS);
    const unindexed = Math.max(0, state.last_seq - this.#index.followed);
    const cursor = o.after ?? { seq: Number.MAX_SAFE_INTEGER, k: -1 };
    const budget = new PageBudget(o.maxBytes);
    const maxReads = o.maxReads ?? MAX_READS;
    const readsAtStart = this.#index.data.reads;
    let fetched = 0;
    const deadline = o.deadlineMs === undefined ? Number.POSITIVE_INFINITY : performance.now() + o.deadlineMs;
    const reads = () =>
      performance.now() > deadline
        ? Number.POSITIVE_INFINITY
        : this.#index.data.reads - readsAtStart + fetched;
    const hits: SearchHit[] = [];
    const l1 = new Map<number, number[]>();
    for (const u of this.#index.units()) {
      if (u.lo > cursor.seq || u.lo + u.span <= state.first_seq) continue;
      if (!plan.timeOverlaps(u.tMin, u.tMax)) continue;
      if (reads() >= maxReads) {
        const top = u.lo + u.span - 1;
        return { hits, next: cursor.seq <= top ? cursor : { seq: top, k: -1 }, unindexed };
      }
      const seqs = (await this.#candidates(u, plan, l1)).filter(
        (s) => s <= cursor.seq && s >= state.first_seq,
      );
      let window = Math.min(FETCH_WINDOW, Math.max(4, o.pageSize - hits.length + 2));
      for (let at = 0; at < seqs.length; ) {
        if (reads() >= maxReads)
          return { hits, next: { seq: seqs[at]!, k: seqs[at] === cursor.seq ? cursor.k : -1 }, unindexed };
        const batch = seqs.slice(at, at + window);
        at += batch.length;
        const msgs = await this.#fetch(batch);
        fetched += batch.length;
        for (let b = 0; b < batch.length; b++) {
          const m = msgs[b];
          if (!m) continue;
          const r = parseStored(m);
          const ix = r && indexedOf(r);
          if (!r || !ix) continue;
          for (const a of accept(r, ix)) {
            if (r.sequence === cursor.seq && a.index <= cursor.k) continue;
            const entry = a.entry ?? ix.entries[a.index];
            const hit: SearchHit = { record: r, index: a.index, ...(entry ? { entry } : {}), time: ix.time };
            const bytes = o.bytes?.(hit) ?? 0;
            if (!budget.fits(bytes)) return { hits, next: { seq: r.sequence, k: a.index - 1 }, unindexed };
            budget.add(bytes);
            hits.push(hit);
            if (hits.length >= o.pageSize) return { hits, next: { seq: r.sequence, k: a.index }, unindexed };
          }
        }
        window = FETCH_WINDOW;
      }
    }
    return { hits, unindexed };
  }

  /** Sequences of a unit the plan may match, newest first. */
  async #candidates(u: Unit, plan: Plan, l1: Map<number, number[]>): Promise<number[]> {
    if (u.kind === "tail") return u.builder.candidates(plan);
    const h = u.header;
    if (h.records === 0) return [];
    if (plan.key !== undefined) {
      const group = this.#index.l1Of(h.lo);
      if (group) {
        let seqs = l1.get(group.lo);
        if (!seqs) {
          const bucket = splitKey(plan.key).hi >>> 6;
          const blob = await this.#index.data.blob(group.keys[bucket] ?? []);
          seqs = lookupKey(blob, plan.key, L1_KEY_BYTES).map((o) => group.lo + o);
          l1.set(group.lo, seqs);
        }
        const mine = seqs.filter((s) => s >= h.lo && s < h.lo + h.span).map((s) => s - h.lo);
        return inTime(plan, mine, h.span, h.slices)
          .sort((a, b) => b - a)
          .map((o) => h.lo + o);
      }
      const part = splitKey(plan.key).hi >>> 12;
      const blob = await this.#index.data.blob(h.keys[part] ?? []);
      return inTime(plan, lookupKey(blob, plan.key, L0_KEY_BYTES), h.span, h.slices)
        .sort((a, b) => b - a)
        .map((o) => h.lo + o);
    }
    let tuples = this.#tuples.get(h);
    if (!tuples) {
      tuples = tuplesOf(h);
      this.#tuples.set(h, tuples);
    }
    const matched = tuples.filter((t) => t.count > 0 && (t.wildcard || plan.facets(t)));
    if (matched.length === 0) return [];
    let eventOffs: Set<number> | undefined;
    if (plan.event !== undefined) {
      const events = eventsOf(h);
      const lists = [events.get(plan.event), events.get(WILDCARD_EVENT)].filter((e) => e !== undefined);
      if (lists.length === 0) return [];
      eventOffs = new Set();
      for (const e of lists) for (const o of await this.#offsets(h, e)) eventOffs.add(o);
    }
    const offs = new Set<number>();
    for (const t of matched) {
      for (const o of await this.#offsets(h, t)) if (!eventOffs || eventOffs.has(o)) offs.add(o);
    }
    return inTime(plan, [...offs], h.span, h.slices)
      .sort((a, b) => b - a)
      .map((o) => h.lo + o);
  }

  async #offsets(h: SegmentHeader, p: Postings): Promise<number[]> {
    if (p.inline) return p.inline;
    const bytes = await this.#index.data.range(h.post ?? [], 2 * p.at, 2 * (p.at + p.count), CHUNK_BYTES);
    return readOffsets(bytes, 0, p.count);
  }

  async #fetch(seqs: readonly number[]): Promise<(StoredMsg | undefined)[]> {
    return Promise.all(seqs.map((seq) => getBySequence(this.#jsm, ATTEMPTS_STREAM, seq)));
  }
}

const decoder = new TextDecoder();

function parseStored(m: StoredMsg): Stored<LogRecord> | undefined {
  try {
    const r = JSON.parse(decoder.decode(m.data)) as LogRecord;
    return typeof r === "object" && r !== null ? { ...r, sequence: m.seq } : undefined;
  } catch {
    return undefined;
  }
}
