import type { Facets, Indexed } from "./entries.js";
import { splitKey } from "./entries.js";
import type { Plan } from "./plan.js";

/**
 * Segments of the attempt-log index (docs/design/attempt-search.md section 3). Level 0 covers
 * L0_SPAN sequences of ATTEMPTS: a JSON header with its facet table, binary postings (16-bit
 * offsets per facet tuple and per event) and binary keys in L0_KEY_PARTS parts. Level 1 holds the
 * keys of L1_GROUP consecutive level-0 segments in L1_KEY_BUCKETS parts.
 */
export interface Spans {
  /** Sequences per level-0 segment (a power of two up to 65 536: offsets are 16 bits). */
  l0: number;
  /** Level-0 segments per level-1 group. */
  group: number;
  /** Postings kept in the header up to this many entries (INLINE_POSTINGS; tests lower it). */
  inline?: number;
}
export const DEFAULT_SPANS: Spans = { l0: 65_536, group: 64 };
export const L0_KEY_PARTS = 16;
export const L1_KEY_BUCKETS = 1024;
/** Data messages are cut at this size (nats-server's default max payload is 1 MiB). */
export const CHUNK_BYTES = 256 * 1024;
/** A header's facet table is cut at about this many JSON bytes; the rest is one wildcard tuple. */
const MAX_FACET_TABLE_BYTES = 600 * 1024;
/** Events listed per header at most; the rest under WILDCARD_EVENT. */
const MAX_EVENTS = 4000;
/** A tuple of WILDCARD index values: entries the header could not describe (they match any query). */
export const WILDCARD = -1;
export const WILDCARD_EVENT = "*";
/** A segment's records are cut in this many slices, each with its time span, for time ranges. */
export const SLICES = 64;
export const sliceSize = (span: number) => Math.max(1, Math.floor(span / SLICES));

/**
 * Tuples and events with at most this many entries keep their offsets in the header (in memory):
 * a rare facet (a destination's one 418 in a segment) then costs no read of the postings.
 */
export const INLINE_POSTINGS = 8;

/** Bytes of one key entry: level 0 (hi16, lo32, offset16), level 1 (hi16, lo32, offset32). */
export const L0_KEY_BYTES = 8;
export const L1_KEY_BYTES = 10;

export interface SegmentHeader {
  v: 1;
  level: 0 | 1;
  /** The ATTEMPTS stream this indexes (its creation time): a recreated stream starts afresh. */
  log: string;
  lo: number;
  span: number;
  /** Records indexed (health summaries and unreadable records not counted). */
  records: number;
  /** Earliest and latest record time (ms); 0 and -1 without records. */
  tMin: number;
  tMax: number;
  /** Level 0: destination and source ids the tuples refer to. */
  dests?: string[];
  sources?: string[];
  /**
   * Level 0: [destination index, source index, status, http, call type, count], then the offsets
   * when count <= INLINE_POSTINGS (else they are in the postings blob); WILDCARD in the first.
   */
  tuples?: number[][];
  /** Level 0: [event hash or WILDCARD_EVENT, count], then the offsets when inline, as for tuples. */
  events?: (string | number)[][];
  /** Level 0: earliest and latest record time of each slice, [min, max] after one another ([0, -1]: none). */
  slices?: number[];
  /** Level 0: the postings blob's chunks (INDEX sequences): tuples' then events' offsets, u16 each. */
  post?: number[];
  /** The key parts' chunks (INDEX sequences), per part; [] for an empty part. */
  keys: number[][];
}

/** A header with its tuples decoded, as the query reads it. */
export interface Tuple extends Facets {
  wildcard: boolean;
  count: number;
  /** Where its offsets start in the postings blob (in entries), unless they are `inline`. */
  at: number;
  inline?: number[];
}

/** Offsets of a tuple or event: inline, or where in the postings blob. */
export interface Postings {
  count: number;
  at: number;
  inline?: number[];
}

export function tuplesOf(h: SegmentHeader): Tuple[] {
  let at = 0;
  return (h.tuples ?? []).map(([d, s, status, http, callType, count, ...inline]) => {
    const wildcard = d === WILDCARD;
    const t: Tuple = {
      wildcard,
      destinationId: wildcard ? "" : (h.dests?.[d!] ?? ""),
      sourceId: wildcard ? "" : (h.sources?.[s!] ?? ""),
      status: status as Tuple["status"],
      http: http!,
      callType: callType!,
      count: count!,
      at,
    };
    if (inline.length > 0) t.inline = inline;
    else at += count!;
    return t;
  });
}

/** Each event's offsets: inline, or where in the postings blob (after every tuple's). */
export function eventsOf(h: SegmentHeader): Map<string, Postings> {
  let at = (h.tuples ?? []).reduce((n, t) => n + (t.length > 6 ? 0 : t[5]!), 0);
  const out = new Map<string, Postings>();
  for (const [hash, count, ...inline] of h.events ?? []) {
    if (inline.length > 0)
      out.set(hash as string, { count: count as number, at, inline: inline as number[] });
    else {
      out.set(hash as string, { count: count as number, at });
      at += count as number;
    }
  }
  return out;
}

interface TupleBuild {
  facets: Facets;
  offs: number[];
}

/**
 * The level-0 segment under way: what the indexer folds records into, searched in memory until
 * it is written, then encoded once.
 */
export class SegmentBuilder {
  readonly lo: number;
  readonly span: number;
  records = 0;
  tMin = Number.POSITIVE_INFINITY;
  tMax = Number.NEGATIVE_INFINITY;
  /** The highest sequence folded in. */
  last = 0;
  readonly #tuples = new Map<string, TupleBuild>();
  readonly #events = new Map<string, number[]>();
  readonly #keyHi: number[] = [];
  readonly #keyLo: number[] = [];
  readonly #keyOff: number[] = [];
  readonly #sliceMin = new Array<number>(SLICES).fill(Number.POSITIVE_INFINITY);
  readonly #sliceMax = new Array<number>(SLICES).fill(Number.NEGATIVE_INFINITY);

  readonly #inline: number;

  constructor(lo: number, span: number, inline = INLINE_POSTINGS) {
    this.lo = lo;
    this.span = span;
    this.#inline = inline;
  }

  /** The slices' time spans, as a header keeps them. */
  slices(): number[] {
    const out: number[] = [];
    for (let i = 0; i < SLICES; i++) {
      const empty = this.#sliceMax[i] === Number.NEGATIVE_INFINITY;
      out.push(empty ? 0 : this.#sliceMin[i]!, empty ? -1 : this.#sliceMax[i]!);
    }
    return out;
  }

  add(seq: number, ix: Indexed): void {
    const off = seq - this.lo;
    this.last = Math.max(this.last, seq);
    this.records++;
    if (ix.time < this.tMin) this.tMin = ix.time;
    if (ix.time > this.tMax) this.tMax = ix.time;
    const slice = Math.floor(off / sliceSize(this.span));
    if (ix.time < this.#sliceMin[slice]!) this.#sliceMin[slice] = ix.time;
    if (ix.time > this.#sliceMax[slice]!) this.#sliceMax[slice] = ix.time;
    for (const e of ix.entries) {
      const key = `${e.destinationId}\n${e.sourceId}\n${e.status}\n${e.http}\n${e.callType}`;
      let t = this.#tuples.get(key);
      if (!t) {
        const { destinationId, sourceId, status, http, callType } = e;
        t = { facets: { destinationId, sourceId, status, http, callType }, offs: [] };
        this.#tuples.set(key, t);
      }
      if (t.offs.at(-1) !== off) t.offs.push(off);
    }
    if (ix.event !== undefined) {
      let list = this.#events.get(ix.event);
      if (!list) {
        list = [];
        this.#events.set(ix.event, list);
      }
      list.push(off);
    }
    for (const k of ix.keys) {
      const { hi, lo } = splitKey(k);
      this.#keyHi.push(hi);
      this.#keyLo.push(lo);
      this.#keyOff.push(off);
    }
  }

  /** Sequences of this segment the plan may match, newest first (the in-memory tail). */
  candidates(plan: Plan): number[] {
    if (this.records === 0 || !plan.timeOverlaps(this.tMin, this.tMax)) return [];
    let offs: Set<number> | undefined;
    if (plan.key !== undefined) {
      const { hi, lo } = splitKey(plan.key);
      offs = new Set();
      for (let i = 0; i < this.#keyHi.length; i++) {
        if (this.#keyHi[i] === hi && this.#keyLo[i] === lo) offs.add(this.#keyOff[i]!);
      }
    } else {
      offs = new Set();
      for (const t of this.#tuples.values()) if (plan.facets(t.facets)) for (const o of t.offs) offs.add(o);
      if (plan.event !== undefined) {
        const ev = new Set(this.#events.get(plan.event) ?? []);
        offs = new Set([...offs].filter((o) => ev.has(o)));
      }
    }
    return inTime(plan, [...offs], this.span, this.slices())
      .sort((a, b) => b - a)
      .map((o) => this.lo + o);
  }

  /** The header (without data sequences) and the blobs to store: postings and key parts. */
  encode(log: string): { header: SegmentHeader; postings: Uint8Array; parts: Uint8Array[] } {
    const dests: string[] = [];
    const sources: string[] = [];
    const destIx = new Map<string, number>();
    const sourceIx = new Map<string, number>();
    const intern = (list: string[], ix: Map<string, number>, id: string) => {
      let i = ix.get(id);
      if (i === undefined) {
        i = list.length;
        list.push(id);
        ix.set(id, i);
      }
      return i;
    };
    // Most frequent first: past the size cap, the rarest go under one wildcard tuple.
    const all = [...this.#tuples.values()].sort((a, b) => b.offs.length - a.offs.length);
    const tuples: number[][] = [];
    const lists: number[][] = [];
    let bytes = 0;
    let rest: number[] | undefined;
    for (const t of all) {
      const f = t.facets;
      const cost =
        32 +
        (destIx.has(f.destinationId) ? 0 : f.destinationId.length + 3) +
        (sourceIx.has(f.sourceId) ? 0 : f.sourceId.length + 3);
      if (rest === undefined && bytes + cost <= MAX_FACET_TABLE_BYTES) {
        bytes += cost;
        const row = [
          intern(dests, destIx, f.destinationId),
          intern(sources, sourceIx, f.sourceId),
          f.status,
          f.http,
          f.callType,
          t.offs.length,
        ];
        if (t.offs.length <= this.#inline) row.push(...t.offs);
        else lists.push(t.offs);
        tuples.push(row);
      } else {
        rest = (rest ?? []).concat(t.offs);
      }
    }
    if (rest) {
      const offs = [...new Set(rest)].sort((a, b) => a - b);
      // Never inline: a wildcard row is told apart by its length.
      tuples.push([WILDCARD, WILDCARD, WILDCARD, WILDCARD, WILDCARD, offs.length]);
      lists.push(offs);
    }
    const byCount = [...this.#events.entries()].sort((a, b) => b[1].length - a[1].length);
    const events: (string | number)[][] = [];
    const event = (hash: string, offs: number[]) => {
      if (offs.length <= this.#inline) events.push([hash, offs.length, ...offs]);
      else {
        events.push([hash, offs.length]);
        lists.push(offs);
      }
    };
    let otherEvents: number[] | undefined;
    for (const [hash, offs] of byCount) {
      if (events.length < MAX_EVENTS) event(hash, offs);
      else otherEvents = (otherEvents ?? []).concat(offs);
    }
    if (otherEvents)
      event(
        WILDCARD_EVENT,
        [...new Set(otherEvents)].sort((a, b) => a - b),
      );
    const total = lists.reduce((n, l) => n + l.length, 0);
    const postings = new Uint8Array(total * 2);
    const pv = new DataView(postings.buffer);
    let at = 0;
    for (const l of lists) for (const o of l) pv.setUint16(2 * at++, o, true);

    const parts = keyParts(this.#keyHi, this.#keyLo, this.#keyOff, L0_KEY_PARTS, 12, L0_KEY_BYTES);
    const empty = this.records === 0;
    const header: SegmentHeader = {
      v: 1,
      level: 0,
      log,
      lo: this.lo,
      span: this.span,
      records: this.records,
      tMin: empty ? 0 : this.tMin,
      tMax: empty ? -1 : this.tMax,
      dests,
      sources,
      tuples,
      events,
      slices: this.slices(),
      keys: [],
    };
    return { header, postings, parts };
  }
}

/** Offsets whose slice's time span meets the plan's time range (all of them when it has none). */
export function inTime(
  plan: Plan,
  offs: number[],
  span: number,
  slices: readonly number[] | undefined,
): number[] {
  if (!plan.timed || !slices) return offs;
  const size = sliceSize(span);
  return offs.filter((o) => {
    const i = Math.floor(o / size);
    const max = slices[2 * i + 1] ?? 0;
    return max >= 0 && plan.timeOverlaps(slices[2 * i]!, max);
  });
}

/**
 * Key entries sorted and cut into `count` parts by the top bits of `hi` (`shift`: 16 minus the
 * part bits), each part a blob of `entryBytes` entries (hi16, lo32, offset16 or offset32).
 *
 * Sorted by a counting sort on `hi` (16 bits), then each run of one `hi` by (lo, offset): a
 * comparator sort of all entries took ~300 ms for one part of a level-1 merge (half a million
 * keys), 16 times per merge, each time blocking the api's event loop and so its ingest.
 */
export function keyParts(
  hi: readonly number[],
  lo: readonly number[],
  off: readonly number[],
  count: number,
  shift: number,
  entryBytes: number,
): Uint8Array[] {
  const order = sortedKeyOrder(hi, lo, off);
  const sizes = new Array<number>(count).fill(0);
  for (let k = 0; k < hi.length; k++) sizes[hi[k]! >>> shift]!++;
  const parts = sizes.map((n) => new Uint8Array(n * entryBytes));
  // In (hi, lo, off) order the entries of a part come one after another: each part is filled
  // from its start, through one view at a time.
  let p = -1;
  let v: DataView | undefined;
  let at = 0;
  for (let k = 0; k < order.length; k++) {
    const i = order[k]!;
    const h = hi[i]!;
    if (h >>> shift !== p) {
      p = h >>> shift;
      v = new DataView(parts[p]!.buffer);
      at = 0;
    }
    v!.setUint16(at, h, true);
    v!.setUint32(at + 2, lo[i]!, true);
    if (entryBytes === L0_KEY_BYTES) v!.setUint16(at + 6, off[i]!, true);
    else v!.setUint32(at + 6, off[i]!, true);
    at += entryBytes;
  }
  return parts;
}

const HI_VALUES = 1 << 16;
/** Runs of one `hi` up to this long are sorted by insertion (most are a few entries). */
const INSERTION_RUN = 24;

/** Entry indices in (hi, lo, off) order. */
function sortedKeyOrder(hi: readonly number[], lo: readonly number[], off: readonly number[]): Uint32Array {
  const n = hi.length;
  const starts = new Uint32Array(HI_VALUES + 1);
  for (let i = 0; i < n; i++) starts[hi[i]! + 1]!++;
  for (let h = 0; h < HI_VALUES; h++) starts[h + 1]! += starts[h]!;
  const next = starts.slice(0, HI_VALUES);
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[next[hi[i]!]!++] = i;
  const before = (a: number, b: number) => lo[a]! < lo[b]! || (lo[a] === lo[b] && off[a]! < off[b]!);
  for (let h = 0; h < HI_VALUES; h++) {
    const from = starts[h]!;
    const to = starts[h + 1]!;
    if (to - from < 2) continue;
    if (to - from > INSERTION_RUN) {
      // A long run (one user's many calls share a key): a comparison sort of that run only.
      order.subarray(from, to).sort((a, b) => lo[a]! - lo[b]! || off[a]! - off[b]!);
      continue;
    }
    for (let i = from + 1; i < to; i++) {
      const x = order[i]!;
      let j = i - 1;
      while (j >= from && before(x, order[j]!)) {
        order[j + 1] = order[j]!;
        j--;
      }
      order[j + 1] = x;
    }
  }
  return order;
}

/** The offsets of `key` in a key part (binary search; the part is sorted by key). */
export function lookupKey(part: Uint8Array, key: string, entryBytes: number): number[] {
  const { hi, lo } = splitKey(key);
  const v = new DataView(part.buffer, part.byteOffset, part.byteLength);
  const n = Math.floor(part.byteLength / entryBytes);
  const cmp = (i: number) =>
    v.getUint16(i * entryBytes, true) - hi || v.getUint32(i * entryBytes + 2, true) - lo;
  let a = 0;
  let b = n;
  while (a < b) {
    const m = (a + b) >>> 1;
    if (cmp(m) < 0) a = m + 1;
    else b = m;
  }
  const out: number[] = [];
  for (let i = a; i < n && cmp(i) === 0; i++) {
    out.push(
      entryBytes === L0_KEY_BYTES
        ? v.getUint16(i * entryBytes + 6, true)
        : v.getUint32(i * entryBytes + 6, true),
    );
  }
  return out;
}

/** Every entry of a key part, as parallel arrays (the level-1 merge). */
export function readKeyPart(
  part: Uint8Array,
  entryBytes: number,
): { hi: number[]; lo: number[]; off: number[] } {
  const v = new DataView(part.buffer, part.byteOffset, part.byteLength);
  const out = { hi: [] as number[], lo: [] as number[], off: [] as number[] };
  for (let at = 0; at + entryBytes <= part.byteLength; at += entryBytes) {
    out.hi.push(v.getUint16(at, true));
    out.lo.push(v.getUint32(at + 2, true));
    out.off.push(entryBytes === L0_KEY_BYTES ? v.getUint16(at + 6, true) : v.getUint32(at + 6, true));
  }
  return out;
}

/** `count` u16 offsets from entry `at` of a postings blob. */
export function readOffsets(postings: Uint8Array, at: number, count: number): number[] {
  const v = new DataView(postings.buffer, postings.byteOffset, postings.byteLength);
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) out[i] = v.getUint16(2 * (at + i), true);
  return out;
}

/** Cuts a blob into chunks of at most CHUNK_BYTES (at least one, possibly empty). */
export function chunks(blob: Uint8Array, size = CHUNK_BYTES): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let at = 0; at < blob.byteLength; at += size) out.push(blob.subarray(at, at + size));
  return out;
}
