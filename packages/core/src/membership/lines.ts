import { createReadStream } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";

/**
 * Membership lists are text: one entry per line, `<id>` for audiences and `<id>\t<json>` for
 * computed traits, sorted by id (JavaScript string order, i.e. UTF-16 code units). Ids are
 * opaque strings, so the few characters that would break the format are escaped.
 */
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const UNESCAPES: Record<string, string> = { "\\": "\\", n: "\n", r: "\r", t: "\t" };
const NEEDS_ESCAPE = /[\\\n\r\t]/;

export function escapeField(s: string): string {
  return NEEDS_ESCAPE.test(s) ? s.replace(/[\\\n\r\t]/g, (c) => ESCAPES[c]!) : s;
}

export function unescapeField(s: string): string {
  return s.includes("\\") ? s.replace(/\\(.)/gs, (_, c: string) => UNESCAPES[c] ?? c) : s;
}

/** One entry of a membership list: the escaped id and its value (canonical JSON, "" for audiences). */
export interface Entry {
  id: string;
  value: string;
}

export function formatEntry(e: Entry): string {
  return e.value === "" ? e.id : `${e.id}\t${e.value}`;
}

export function parseEntry(line: string): Entry {
  const tab = line.indexOf("\t");
  return tab < 0 ? { id: line, value: "" } : { id: line.slice(0, tab), value: line.slice(tab + 1) };
}

/** Entries in ascending id order, each id once. */
export interface SortedSource {
  next(): Promise<Entry | undefined>;
  close(): Promise<void>;
}

export const EMPTY_SOURCE: SortedSource = {
  next: async () => undefined,
  close: async () => {},
};

/** Splits a byte stream into lines, a chunk at a time (the source is pulled only when needed). */
export class LineReader {
  readonly #it: AsyncIterator<Uint8Array>;
  readonly #decoder = new TextDecoder("utf-8", { fatal: true });
  #lines: string[] = [];
  #i = 0;
  #rest = "";
  #done = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  async next(): Promise<string | undefined> {
    while (this.#i >= this.#lines.length) {
      if (this.#done) return undefined;
      const r = await this.#it.next();
      this.#i = 0;
      if (r.done) {
        this.#done = true;
        const tail = this.#rest + this.#decoder.decode();
        this.#rest = "";
        this.#lines = tail === "" ? [] : [tail];
        continue;
      }
      const parts = (this.#rest + this.#decoder.decode(r.value, { stream: true })).split("\n");
      this.#rest = parts.pop()!;
      this.#lines = parts;
    }
    return this.#lines[this.#i++];
  }

  async close(): Promise<void> {
    this.#done = true;
    this.#lines = [];
    await this.#it.return?.();
  }
}

/** Reads a membership list (a local file or any byte stream) as entries. */
export class LineSource implements SortedSource {
  readonly #reader: LineReader;
  readonly #checkOrder: boolean;
  #last: string | undefined;

  /** With `checkOrder`, an id not strictly above the previous one throws (a corrupt list). */
  constructor(source: AsyncIterable<Uint8Array>, checkOrder = false) {
    this.#reader = new LineReader(source);
    this.#checkOrder = checkOrder;
  }

  static file(path: string): LineSource {
    return new LineSource(createReadStream(path, { highWaterMark: 64 * 1024 }));
  }

  async next(): Promise<Entry | undefined> {
    const line = await this.#reader.next();
    if (line === undefined) return undefined;
    const e = parseEntry(line);
    if (this.#checkOrder) {
      if (this.#last !== undefined && !(this.#last < e.id)) {
        throw new Error("stored membership list is not sorted (corrupt)");
      }
      this.#last = e.id;
    }
    return e;
  }

  close(): Promise<void> {
    return this.#reader.close();
  }
}

/** Writes lines to a file in 64 KiB batches. */
export class LineFileWriter {
  readonly #fh: FileHandle;
  #buf: string[] = [];
  #len = 0;
  #bytes = 0;
  #lines = 0;

  private constructor(fh: FileHandle) {
    this.#fh = fh;
  }

  static async create(path: string): Promise<LineFileWriter> {
    return new LineFileWriter(await open(path, "w"));
  }

  /** Lines written so far. */
  get lines(): number {
    return this.#lines;
  }

  /** Returns a promise only when it flushed a batch to disk. */
  write(line: string): Promise<void> | undefined {
    this.#buf.push(line, "\n");
    this.#len += line.length + 1;
    this.#lines++;
    return this.#len >= 64 * 1024 ? this.#flush() : undefined;
  }

  async #flush(): Promise<void> {
    if (this.#len === 0) return;
    const text = this.#buf.join("");
    this.#buf = [];
    this.#len = 0;
    const { bytesWritten } = await this.#fh.write(text);
    this.#bytes += bytesWritten;
  }

  /** Flushes and closes; resolves with the file size in bytes. */
  async close(): Promise<number> {
    try {
      await this.#flush();
    } finally {
      await this.#fh.close();
    }
    return this.#bytes;
  }

  /** Closes without caring about the content (cleanup after an error). */
  async abort(): Promise<void> {
    this.#buf = [];
    this.#len = 0;
    await this.#fh.close().catch(() => {});
  }
}
