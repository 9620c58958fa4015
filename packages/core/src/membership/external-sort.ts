import { join } from "node:path";
import { type Entry, LineFileWriter, LineSource, type SortedSource } from "./lines.js";

export interface SortOptions {
  /** Folder for spilled runs (the caller creates and removes it). */
  dir: string;
  /** A run is spilled to disk once it holds this many distinct ids. */
  maxEntries: number;
  /** ... or once its ids and values take about this many bytes of memory. */
  maxBytes: number;
  /** At most this many runs are merged at once (more are merged in rounds); default 64. */
  fanIn?: number;
}

/** Estimated memory of one Map entry besides its strings. */
const ENTRY_OVERHEAD = 64;

/**
 * External sort with deduplication: entries are collected into an in-memory run (a Map, so a
 * repeated id replaces the earlier entry) of bounded size; a full run is sorted and spilled to
 * a file. `finish` returns the whole input as one sorted source with each id once, the value
 * given last winning (runs keep input order, and among equal ids the latest run wins).
 * Memory: one run plus a read buffer per spilled run.
 */
export class RunBuilder {
  readonly #o: Required<SortOptions>;
  #map = new Map<string, string>();
  #bytes = 0;
  readonly #runs: string[] = [];
  #files = 0;

  constructor(options: SortOptions) {
    this.#o = { fanIn: 64, ...options };
  }

  /** Runs spilled to disk so far. */
  get spilled(): number {
    return this.#files;
  }

  /** Adds an entry; returns a promise only when a run was spilled to disk. */
  add(id: string, value: string): Promise<void> | undefined {
    this.#map.set(id, value);
    this.#bytes += (id.length + value.length) * 2 + ENTRY_OVERHEAD;
    if (this.#map.size >= this.#o.maxEntries || this.#bytes >= this.#o.maxBytes) return this.#spill();
    return undefined;
  }

  async #spill(): Promise<void> {
    const map = this.#map;
    this.#map = new Map();
    this.#bytes = 0;
    const ids = [...map.keys()].sort();
    const path = this.#nextPath();
    const out = await LineFileWriter.create(path);
    try {
      for (const id of ids) {
        const value = map.get(id)!;
        // Awaited only when a batch went to disk: an await per line costs a microtask each.
        const flushed = out.write(value === "" ? id : `${id}\t${value}`);
        if (flushed) await flushed;
      }
      await out.close();
    } catch (err) {
      await out.abort();
      throw err;
    }
    this.#runs.push(path);
  }

  #nextPath(): string {
    return join(this.#o.dir, `run-${this.#files++}.txt`);
  }

  /** Everything added, sorted and deduplicated. Call once, after the last `add`. */
  async finish(): Promise<SortedSource> {
    if (this.#runs.length === 0) return new MemorySource(this.#map);
    if (this.#map.size > 0) await this.#spill();
    while (this.#runs.length > this.#o.fanIn) {
      const group = this.#runs.slice(0, this.#o.fanIn);
      const path = this.#nextPath();
      await copyToFile(await MergeSource.open(group.map((p) => LineSource.file(p))), path);
      this.#runs.splice(0, group.length, path);
    }
    return MergeSource.open(this.#runs.map((p) => LineSource.file(p)));
  }
}

async function copyToFile(source: SortedSource, path: string): Promise<void> {
  const out = await LineFileWriter.create(path);
  try {
    for (let e = await source.next(); e !== undefined; e = await source.next()) {
      const flushed = out.write(e.value === "" ? e.id : `${e.id}\t${e.value}`);
      if (flushed) await flushed;
    }
    await out.close();
  } catch (err) {
    await out.abort();
    throw err;
  } finally {
    await source.close();
  }
}

/** A run that never left memory. */
class MemorySource implements SortedSource {
  readonly #map: Map<string, string>;
  readonly #ids: string[];
  #i = 0;

  constructor(map: Map<string, string>) {
    this.#map = map;
    this.#ids = [...map.keys()].sort();
  }

  async next(): Promise<Entry | undefined> {
    const id = this.#ids[this.#i++];
    return id === undefined ? undefined : { id, value: this.#map.get(id)! };
  }

  async close(): Promise<void> {}
}

/** k-way merge of sorted sources (a binary heap on (id, source index)); equal ids: the last source wins. */
export class MergeSource implements SortedSource {
  readonly #sources: SortedSource[];
  readonly #heads: (Entry | undefined)[];
  readonly #heap: number[] = [];

  private constructor(sources: SortedSource[]) {
    this.#sources = sources;
    this.#heads = new Array(sources.length).fill(undefined);
  }

  static async open(sources: SortedSource[]): Promise<MergeSource> {
    const m = new MergeSource(sources);
    try {
      for (let i = 0; i < sources.length; i++) {
        const e = await sources[i]!.next();
        if (e !== undefined) {
          m.#heads[i] = e;
          m.#heap.push(i);
          m.#up(m.#heap.length - 1);
        }
      }
    } catch (err) {
      await m.close();
      throw err;
    }
    return m;
  }

  #less(a: number, b: number): boolean {
    const ea = this.#heads[a]!.id;
    const eb = this.#heads[b]!.id;
    return ea < eb || (ea === eb && a < b);
  }

  #up(i: number): void {
    const h = this.#heap;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  #down(i: number): void {
    const h = this.#heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.#less(h[l]!, h[m]!)) m = l;
      if (r < h.length && this.#less(h[r]!, h[m]!)) m = r;
      if (m === i) return;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }

  /** Replaces the head of the source at the top of the heap with its next entry. */
  async #advanceTop(): Promise<void> {
    const h = this.#heap;
    const s = h[0]!;
    const e = await this.#sources[s]!.next();
    if (e === undefined) {
      this.#heads[s] = undefined;
      const last = h.pop()!;
      if (h.length === 0) return;
      h[0] = last;
    } else {
      this.#heads[s] = e;
    }
    this.#down(0);
  }

  async next(): Promise<Entry | undefined> {
    if (this.#heap.length === 0) return undefined;
    let e = this.#heads[this.#heap[0]!]!;
    const id = e.id;
    await this.#advanceTop();
    while (this.#heap.length > 0 && this.#heads[this.#heap[0]!]!.id === id) {
      e = this.#heads[this.#heap[0]!]!;
      await this.#advanceTop();
    }
    return e;
  }

  async close(): Promise<void> {
    await Promise.all(this.#sources.map((s) => s.close().catch(() => {})));
  }
}
