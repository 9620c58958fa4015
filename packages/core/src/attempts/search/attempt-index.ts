import type { JetStreamClient, JetStreamManager, NatsConnection, StoredMsg } from "nats";
import type { Logger } from "../../log/logger.js";
import { isNotFound } from "../../nats/jetstream-errors.js";
import { StreamFeed } from "../../nats/stream-feed.js";
import {
  ATTEMPT_INDEX_DATA_SUBJECT,
  ATTEMPT_INDEX_HEAD_SUBJECT,
  ATTEMPT_INDEX_STREAM,
  ATTEMPTS_STREAM,
} from "../../nats/topology.js";
import type { LogRecord } from "../record.js";
import { indexedOf } from "./entries.js";
import {
  chunks,
  DEFAULT_SPANS,
  keyParts,
  L0_KEY_BYTES,
  L0_KEY_PARTS,
  L1_KEY_BUCKETS,
  L1_KEY_BYTES,
  readKeyPart,
  SegmentBuilder,
  type SegmentHeader,
  type Spans,
} from "./segment.js";

export interface AttemptIndexOptions {
  logger: Logger;
  /** Segment sizes (tests use small ones); every replica of a deployment must use the same. */
  spans?: Spans;
  /** A replica waits up to this long (random) before writing a segment or merging a group, so that replicas rarely do the same work twice. */
  jitterMs?: number;
  /** How long start waits for the headers already written (then it goes on with what it has). */
  loadTimeoutMs?: number;
}

/** A part of the log a query reads: a written level-0 segment, or one still in memory. */
export type Unit =
  | { kind: "tail"; lo: number; span: number; tMin: number; tMax: number; builder: SegmentBuilder }
  | { kind: "l0"; lo: number; span: number; tMin: number; tMax: number; header: SegmentHeader };

/** Blobs read from the index stream, kept while they fit (they never change once written). */
const DATA_CACHE_BYTES = 64 * 1024 * 1024;
/** How often headers of aged-out segments are dropped from memory. */
const PRUNE_EVERY_MS = 60_000;
const RETRY_MS = 2000;
const decoder = new TextDecoder();
const encoder = new TextEncoder();
/** A health summary starts like this: skipped without parsing (one per replica and second). */
const HEALTH_PREFIX = encoder.encode('{"kind":"health"');

/**
 * The attempt log's search index (docs/design/attempt-search.md): follows HOOKPOST_ATTEMPTS,
 * folds every record into the level-0 segment under way (searched in memory until written),
 * writes complete segments to HOOKPOST_ATTEMPT_INDEX unless another replica did, merges keys of
 * complete groups into level-1 segments, and holds every header in memory for queries.
 */
export class AttemptIndex {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #o: AttemptIndexOptions;
  readonly spans: Spans;
  /** The ATTEMPTS stream's creation time: headers of an earlier stream of that name are ignored. */
  readonly log: string;
  readonly data: IndexData;
  readonly #l0 = new Map<number, SegmentHeader>();
  readonly #l1 = new Map<number, SegmentHeader>();
  #l0Sorted: SegmentHeader[] | undefined;
  #current: SegmentBuilder | undefined;
  /** Complete segments not written (or not seen written) yet: still searched in memory. */
  readonly #pending: SegmentBuilder[] = [];
  #writing = false;
  readonly #merging = new Set<number>();
  #followed = 0;
  #headFeed: StreamFeed | undefined;
  #logFeed: StreamFeed | undefined;
  #pruneTimer: ReturnType<typeof setInterval> | undefined;
  #closed = false;
  /** Waiters for `followed` to reach a sequence. */
  #waiters: { seq: number; resolve: () => void }[] = [];

  private constructor(nc: NatsConnection, jsm: JetStreamManager, log: string, o: AttemptIndexOptions) {
    this.#nc = nc;
    this.#js = nc.jetstream();
    this.#jsm = jsm;
    this.#o = o;
    this.spans = o.spans ?? DEFAULT_SPANS;
    this.log = log;
    this.data = new IndexData(jsm);
  }

  /** Loads the headers written so far, then follows the log from the end of the last one. */
  static async open(nc: NatsConnection, o: AttemptIndexOptions): Promise<AttemptIndex> {
    const jsm = await nc.jetstreamManager();
    const info = await jsm.streams.info(ATTEMPTS_STREAM);
    const index = new AttemptIndex(nc, jsm, info.created, o);
    await index.#loadHeaders();
    index.#follow(info.state.first_seq);
    index.#pruneTimer = setInterval(() => void index.#prune(), PRUNE_EVERY_MS);
    index.#pruneTimer.unref();
    return index;
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#pruneTimer);
    this.#headFeed?.close();
    this.#logFeed?.close();
    for (const w of this.#waiters) w.resolve();
    this.#waiters = [];
  }

  /** The last ATTEMPTS sequence folded in: newer records are not searchable on this replica yet. */
  get followed(): number {
    return this.#followed;
  }

  /** Records stored after the last one folded in, as of that one (the metric of the index's lag). */
  get lag(): number {
    return this.#logFeed?.pending ?? 0;
  }

  /** Resolves once every record up to `seq` is folded in, or after `ms`. */
  async caughtUp(seq: number, ms: number): Promise<boolean> {
    if (this.#followed >= seq) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = await Promise.race([
      new Promise<boolean>((resolve) => this.#waiters.push({ seq, resolve: () => resolve(true) })),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
    clearTimeout(timer);
    return done || this.#followed >= seq;
  }

  /** Every part of the log, newest first: segments in memory, then written ones. */
  units(): Unit[] {
    const tails: Unit[] = [...this.#pending, ...(this.#current ? [this.#current] : [])]
      .filter((b) => !this.#l0.has(b.lo))
      .map((b) => ({ kind: "tail", lo: b.lo, span: b.span, tMin: b.tMin, tMax: b.tMax, builder: b }));
    tails.sort((a, b) => b.lo - a.lo);
    const written: Unit[] = [];
    const sorted = this.#sortedL0();
    for (let i = sorted.length - 1; i >= 0; i--) {
      const h = sorted[i]!;
      written.push({ kind: "l0", lo: h.lo, span: h.span, tMin: h.tMin, tMax: h.tMax, header: h });
    }
    return [...tails, ...written];
  }

  /** The level-1 segment of the group a level-0 segment belongs to, when merged. */
  l1Of(lo: number): SegmentHeader | undefined {
    const span = this.spans.l0 * this.spans.group;
    return this.#l1.get(lo - (lo % span));
  }

  /** Sizes for GetAttemptLogInfo and the benchmark. */
  stats(): { l0: number; l1: number; tail: number } {
    const tail = this.#pending.reduce((n, b) => n + b.records, 0) + (this.#current?.records ?? 0);
    return { l0: this.#l0.size, l1: this.#l1.size, tail };
  }

  #sortedL0(): SegmentHeader[] {
    this.#l0Sorted ??= [...this.#l0.values()].sort((a, b) => a.lo - b.lo);
    return this.#l0Sorted;
  }

  async #loadHeaders(): Promise<void> {
    let target = 0;
    try {
      const last = await this.#jsm.streams.getMessage(ATTEMPT_INDEX_STREAM, {
        last_by_subj: ATTEMPT_INDEX_HEAD_SUBJECT,
      });
      target = last.seq;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    let loaded: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      loaded = resolve;
    });
    if (target === 0) loaded();
    this.#headFeed = new StreamFeed({
      nc: this.#nc,
      stream: ATTEMPT_INDEX_STREAM,
      filterSubject: ATTEMPT_INDEX_HEAD_SUBJECT,
      startTime: () => new Date(0),
      onMessage: (data, seq) => {
        try {
          this.#addHeader(JSON.parse(decoder.decode(data)) as SegmentHeader);
        } catch {
          // Not a header of ours: skipped.
        }
        if (seq >= target) loaded();
      },
      logger: this.#o.logger,
    });
    this.#headFeed.start();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      done,
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.#o.logger.warn("attempt index: headers still loading; searching what is loaded");
          resolve();
        }, this.#o.loadTimeoutMs ?? 60_000);
      }),
    ]);
    clearTimeout(timer);
  }

  #addHeader(h: SegmentHeader): void {
    if (h.v !== 1 || h.log !== this.log) return;
    if (h.level === 1) {
      this.#l1.set(h.lo, h);
      return;
    }
    if (this.#l0.has(h.lo)) return;
    this.#l0.set(h.lo, h);
    this.#l0Sorted = undefined;
    this.#maybeMerge(h.lo);
  }

  #follow(firstSeq: number): void {
    const sorted = this.#sortedL0();
    const last = sorted.at(-1);
    const start = Math.max(firstSeq, last ? last.lo + last.span : 1);
    this.#followed = start - 1;
    this.#logFeed = new StreamFeed({
      nc: this.#nc,
      stream: ATTEMPTS_STREAM,
      startTime: () => new Date(0),
      startSequence: () => start,
      onMessage: (data, seq) => this.#fold(data, seq),
      logger: this.#o.logger,
    });
    this.#logFeed.start();
  }

  #fold(data: Uint8Array, seq: number): void {
    const span = this.spans.l0;
    const lo = seq - (seq % span);
    if (!this.#current || this.#current.lo !== lo) {
      if (this.#current) this.#complete(this.#current);
      this.#current = new SegmentBuilder(lo, span, this.spans.inline);
    }
    const b = this.#current;
    if (!startsWith(data, HEALTH_PREFIX)) {
      const ix = indexedOf(parseWithoutBody(decoder.decode(data)));
      if (ix) b.add(seq, ix);
    }
    b.last = seq;
    this.#followed = seq;
    if (this.#waiters.length > 0) {
      const ready = this.#waiters.filter((w) => w.seq <= seq);
      this.#waiters = this.#waiters.filter((w) => w.seq > seq);
      for (const w of ready) w.resolve();
    }
  }

  #complete(b: SegmentBuilder): void {
    if (this.#l0.has(b.lo)) return;
    this.#pending.push(b);
    void this.#writePending();
  }

  async #writePending(): Promise<void> {
    if (this.#writing) return;
    this.#writing = true;
    try {
      while (!this.#closed && this.#pending.length > 0) {
        const b = this.#pending[0]!;
        await pause(Math.random() * (this.#o.jitterMs ?? 1000));
        if (!this.#l0.has(b.lo)) {
          try {
            this.#addHeader(await this.#write(b));
          } catch (err) {
            this.#o.logger.warn(
              { lo: b.lo, err: (err as Error).message },
              "attempt index: segment not written yet",
            );
            await pause(RETRY_MS);
            continue;
          }
        }
        this.#pending.shift();
      }
    } finally {
      this.#writing = false;
    }
  }

  async #write(b: SegmentBuilder): Promise<SegmentHeader> {
    const { header, postings, parts } = b.encode(this.log);
    const id = `${this.log}/0/${b.lo}`;
    header.post = await this.#putBlob(postings, `${id}/p`);
    header.keys = [];
    for (let p = 0; p < parts.length; p++) header.keys.push(await this.#putBlob(parts[p]!, `${id}/k${p}`));
    await this.#putHeader(header, id);
    return header;
  }

  async #putBlob(blob: Uint8Array, id: string): Promise<number[]> {
    const seqs: number[] = [];
    const parts = chunks(blob);
    for (let i = 0; i < parts.length; i++) {
      const ack = await this.#js.publish(ATTEMPT_INDEX_DATA_SUBJECT, parts[i], { msgID: `${id}/${i}` });
      seqs.push(ack.seq);
    }
    return seqs;
  }

  async #putHeader(h: SegmentHeader, id: string): Promise<void> {
    await this.#js.publish(ATTEMPT_INDEX_HEAD_SUBJECT, JSON.stringify(h), { msgID: id });
  }

  /** A group whose level-0 segments are all written (from the first indexed one) gets its level 1. */
  #maybeMerge(lo: number): void {
    const span = this.spans.l0 * this.spans.group;
    const groupLo = lo - (lo % span);
    if (this.#l1.has(groupLo) || this.#merging.has(groupLo)) return;
    const members = this.#groupMembers(groupLo);
    if (!members) return;
    this.#merging.add(groupLo);
    void (async () => {
      try {
        await pause(Math.random() * (this.#o.jitterMs ?? 1000) * 3);
        if (this.#closed || this.#l1.has(groupLo)) return;
        this.#addHeader(await this.#merge(groupLo, members));
      } catch (err) {
        this.#o.logger.warn({ groupLo, err: (err as Error).message }, "attempt index: group not merged yet");
      } finally {
        this.#merging.delete(groupLo);
      }
    })();
  }

  /** The level-0 headers of a complete group, oldest first; undefined while one is missing. */
  #groupMembers(groupLo: number): SegmentHeader[] | undefined {
    const { l0, group } = this.spans;
    const first = this.#sortedL0()[0];
    if (!first) return undefined;
    const out: SegmentHeader[] = [];
    for (let lo = Math.max(groupLo, first.lo); lo < groupLo + l0 * group; lo += l0) {
      const h = this.#l0.get(lo);
      if (!h) return undefined;
      out.push(h);
    }
    return out.length > 0 ? out : undefined;
  }

  async #merge(groupLo: number, members: SegmentHeader[]): Promise<SegmentHeader> {
    const keys: number[][] = Array.from({ length: L1_KEY_BUCKETS }, () => []);
    const id = `${this.log}/1/${groupLo}`;
    const perPart = L1_KEY_BUCKETS / L0_KEY_PARTS;
    // One level-0 part at a time: part p holds exactly level-1 buckets [p * 64, p * 64 + 64).
    for (let p = 0; p < L0_KEY_PARTS; p++) {
      const hi: number[] = [];
      const lo: number[] = [];
      const off: number[] = [];
      for (const h of members) {
        const part = readKeyPart(await this.data.blob(h.keys[p] ?? []), L0_KEY_BYTES);
        for (let i = 0; i < part.hi.length; i++) {
          hi.push(part.hi[i]!);
          lo.push(part.lo[i]!);
          off.push(part.off[i]! + h.lo - groupLo);
        }
      }
      const buckets = keyParts(hi, lo, off, L1_KEY_BUCKETS, 6, L1_KEY_BYTES);
      for (let b = p * perPart; b < (p + 1) * perPart; b++) {
        if (buckets[b]!.byteLength > 0) keys[b] = await this.#putBlob(buckets[b]!, `${id}/b${b}`);
      }
    }
    const withRecords = members.filter((h) => h.records > 0);
    const header: SegmentHeader = {
      v: 1,
      level: 1,
      log: this.log,
      lo: groupLo,
      span: this.spans.l0 * this.spans.group,
      records: members.reduce((n, h) => n + h.records, 0),
      tMin: withRecords.length ? Math.min(...withRecords.map((h) => h.tMin)) : 0,
      tMax: withRecords.length ? Math.max(...withRecords.map((h) => h.tMax)) : -1,
      keys,
    };
    await this.#putHeader(header, id);
    return header;
  }

  /** Headers of segments the log no longer holds leave memory. */
  async #prune(): Promise<void> {
    try {
      const first = (await this.#jsm.streams.info(ATTEMPTS_STREAM)).state.first_seq;
      for (const [lo, h] of this.#l0) {
        if (lo + h.span <= first) {
          this.#l0.delete(lo);
          this.#l0Sorted = undefined;
        }
      }
      for (const [lo, h] of this.#l1) if (lo + h.span <= first) this.#l1.delete(lo);
    } catch {
      // Next time.
    }
  }
}

/** Reads blobs (chunked messages) of the index stream, keeping recent ones. */
export class IndexData {
  readonly #jsm: JetStreamManager;
  readonly #cache = new Map<number, Uint8Array>();
  #bytes = 0;
  /** Messages read from the stream (not the cache): what a query costs. */
  reads = 0;

  constructor(jsm: JetStreamManager) {
    this.#jsm = jsm;
  }

  /** A whole blob: its chunks, concatenated. A chunk the stream no longer has reads as empty. */
  async blob(seqs: readonly number[]): Promise<Uint8Array> {
    const parts = await Promise.all(seqs.map((s) => this.#chunk(s)));
    if (parts.length === 1) return parts[0]!;
    const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.byteLength;
    }
    return out;
  }

  /** Bytes [start, end) of a blob cut in chunks of `chunkBytes`, reading only the chunks needed. */
  async range(seqs: readonly number[], start: number, end: number, chunkBytes: number): Promise<Uint8Array> {
    if (end <= start) return new Uint8Array(0);
    const first = Math.floor(start / chunkBytes);
    const last = Math.floor((end - 1) / chunkBytes);
    const part = await this.blob(seqs.slice(first, last + 1));
    return part.subarray(start - first * chunkBytes, end - first * chunkBytes);
  }

  async #chunk(seq: number): Promise<Uint8Array> {
    const hit = this.#cache.get(seq);
    if (hit) {
      // Most recently used last.
      this.#cache.delete(seq);
      this.#cache.set(seq, hit);
      return hit;
    }
    this.reads++;
    const data = (await getBySequence(this.#jsm, ATTEMPT_INDEX_STREAM, seq))?.data ?? new Uint8Array(0);
    this.#cache.set(seq, data);
    this.#bytes += data.byteLength;
    for (const [s, d] of this.#cache) {
      if (this.#bytes <= DATA_CACHE_BYTES) break;
      this.#cache.delete(s);
      this.#bytes -= d.byteLength;
    }
    return data;
  }
}

/**
 * One message by sequence, undefined when the stream does not have it (erased, aged out). A direct
 * get (the streams allow them): cheaper for the server than a JetStream API request, and served
 * by any replica; "not found" is asked again of the leader, since a replica may lag behind it.
 */
export async function getBySequence(
  jsm: JetStreamManager,
  stream: string,
  seq: number,
): Promise<StoredMsg | undefined> {
  try {
    // nats.js has it on the manager, not in the JetStreamManager type.
    const direct = (jsm as { direct?: { getMessage(s: string, q: { seq: number }): Promise<StoredMsg> } })
      .direct;
    if (direct) return await direct.getMessage(stream, { seq });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  try {
    return await jsm.streams.getMessage(stream, { seq });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * Where a call body starts: the last key of a routing record (`body`) and of a direct delivery's
 * one record (`requestBody`, record.ts deliveredRecord), as they are written.
 */
const BODY_KEY = ',"body":"';
const REQUEST_BODY_KEY = ',"requestBody":"';

/**
 * A record without its call body, which the index never reads (parsing it was half of the
 * indexer's CPU). A `,"body":"` outside a string can only be the record's own key (quotes inside
 * strings are escaped); a record where it is not the last key is parsed whole.
 */
function parseWithoutBody(text: string): LogRecord | undefined {
  let at = text.indexOf(BODY_KEY);
  if (at < 0) at = text.indexOf(REQUEST_BODY_KEY);
  try {
    if (at > 0) {
      try {
        return JSON.parse(`${text.slice(0, at)}}`) as LogRecord;
      } catch {
        // Not the last key: below.
      }
    }
    return JSON.parse(text) as LogRecord;
  } catch {
    return undefined;
  }
}

function startsWith(data: Uint8Array, prefix: Uint8Array): boolean {
  if (data.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[i] !== prefix[i]) return false;
  return true;
}

/** Spreads replicas' writes apart, or waits before retrying a failed write. */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
