import Table from "cli-table3";

/** Where the CLI writes; the process streams by default. */
export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
}

export const processIo: Io = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/**
 * `hookpost … | head`: once the reader is gone, writing fails with EPIPE (Node ignores SIGPIPE and
 * would crash on the unhandled stream error). Like other Unix tools, stop quietly: nobody is
 * reading any more. Other stream errors stay fatal.
 */
let pipeGuarded = false;
export function exitQuietlyOnClosedPipe(): void {
  if (pipeGuarded) return;
  pipeGuarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE") process.exit(0);
      throw err;
    });
  }
}

/**
 * Everything the CLI prints goes through here: readable text and tables by default, JSON with
 * `--json`. Secrets that must never be shown (the admin token) are masked as a last line of defence.
 */
export class Output {
  readonly json: boolean;
  readonly #io: Io;
  #secrets: string[] = [];

  constructor(io: Io, json: boolean) {
    this.#io = io;
    this.json = json;
  }

  /** Never print this value (short values are not masked: they would mangle ordinary text). */
  hide(secret: string | undefined): void {
    if (!secret || secret.length < 6) return;
    this.#secrets.push(secret);
    // As JSON output writes it (a quote, a backslash or a control character escaped).
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) this.#secrets.push(escaped);
  }

  line(text = ""): void {
    this.#io.stdout(`${this.#mask(text)}\n`);
  }

  /** Notes for people (stderr), so stdout stays clean for pipes. */
  note(text: string): void {
    this.#io.stderr(`${this.#mask(text)}\n`);
  }

  /** A machine-readable error (`--json`): one JSON line on stderr, masked like everything else. */
  jsonError(value: unknown): void {
    this.#io.stderr(`${this.#mask(JSON.stringify(value))}\n`);
  }

  /** Machine output: one JSON document on stdout. */
  data(value: unknown): void {
    this.line(JSON.stringify(value, jsonReplacer, 2));
  }

  /** A borderless, aligned table (`kubectl get` style); an empty list prints `empty` instead. */
  table(head: string[], rows: string[][], empty: string): void {
    if (rows.length === 0) {
      this.line(empty);
      return;
    }
    this.line(renderTable(head, rows));
  }

  /** A list command's answer: the items themselves as JSON, else a table of one row each. */
  list<T>(items: readonly T[], head: string[], row: (item: T) => string[], empty: string): void {
    if (this.json) this.data(items);
    else this.table(head, items.map(row), empty);
  }

  /** A write's answer: the resource itself as JSON, else `heading` (what was done) and `print`'s lines. */
  written<T>(value: T, heading: string, print: () => void): void {
    if (this.json) {
      this.data(value);
      return;
    }
    this.line(heading);
    this.line();
    print();
  }

  /**
   * What the server shows only once (a write key, a secret, a portal link's URL): set apart by blank
   * lines and indented under its heading, so nobody misses it and it copies cleanly.
   */
  shownOnce(heading: string, values: readonly string[]): void {
    this.line();
    this.line(`  ${heading}:`);
    this.line();
    for (const v of values) this.line(`    ${v}`);
    this.line();
  }

  /** `key: value` lines with aligned values, for one resource. */
  fields(pairs: [string, string][]): void {
    const width = Math.max(...pairs.map(([k]) => k.length)) + 1;
    for (const [k, v] of pairs) this.line(`${`${k}:`.padEnd(width)} ${v}`.trimEnd());
  }

  #mask(text: string): string {
    let out = text;
    for (const s of this.#secrets) out = out.split(s).join("***");
    return out;
  }
}

const BLANK_CHARS = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "   ",
};

export function renderTable(head: string[], rows: string[][]): string {
  const table = new Table({
    head,
    chars: BLANK_CHARS,
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0, compact: true },
  });
  table.push(...rows);
  return table
    .toString()
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n");
}

/** bigint (uint64 sequences) as JSON numbers when exact, else strings. */
function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
  }
  return value;
}
