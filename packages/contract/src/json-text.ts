import { MAX_REPORTED_VIOLATIONS } from "./limits.js";
import { numberLiteralProblem } from "./numbers.js";
import type { Violation } from "./violation.js";

/** What JSON text as sent holds that its parsed value no longer shows (see scanJsonText). */
export interface JsonTextScan {
  /**
   * Duplicate keys (compared after unescaping: `"batch"` and `"b\u0061tch"` are one key) and
   * numbers that would change (numbers.ts), in document order, each named by its path
   * (`batch[2].properties.n`); at most MAX_REPORTED_VIOLATIONS.
   */
  violations: Violation[];
  /**
   * The body's size as stored: its bytes plus what numbers grow by once re-serialised (`1e20`
   * is stored as 21 digits). Everything else only shrinks (whitespace, escapes, `1.0`), so this
   * bounds the stored JSON from above.
   */
  bytes: number;
  /** The same for each element of the top-level array under `arrayKey`; undefined without one. */
  items: number[] | undefined;
}

const OBJECT = 0;
const ARRAY = 1;
/** Keys of one object compared as bytes up to this many; beyond (or with an escaped key), as strings. */
const BYTE_KEYS = 16;

/**
 * Reads JSON text once, byte by byte, for what JSON.parse hides: a duplicate key (the parser
 * keeps the last one silently, so a body could carry a second `batch` past the size checks), a
 * number the receiver would read as another value, and the size of each call as stored. `bytes`
 * must be valid UTF-8 JSON whose top level is an object (JSON.parse it first): the scan does not
 * re-validate. UTF-8 multi-byte sequences never contain ASCII bytes, so a byte scan is safe.
 * Property-tested against a plain recursive reader (test/contract/json-text.test.ts).
 */
export function scanJsonText(bytes: Uint8Array, arrayKey?: string): JsonTextScan {
  return new Scanner(bytes, arrayKey).run();
}

class Scanner {
  readonly #b: Buffer;
  readonly #arrayKey: string | undefined;
  readonly #violations: Violation[] = [];
  /** Growth of the numbers read so far once re-serialised. */
  #extra = 0;
  /** Open containers; frame d (1-based) is described by the arrays below. */
  #depth = 0;
  readonly #kind: number[] = [-1];
  /** Arrays: the index of the current element. Objects: the current key's range and escaping. */
  readonly #index: number[] = [0];
  readonly #keyStart: number[] = [0];
  readonly #keyEnd: number[] = [0];
  readonly #keyEscaped: boolean[] = [false];
  /** Keys seen in each open object: byte ranges, or decoded strings once past BYTE_KEYS. */
  readonly #keyRanges: number[][] = [[]];
  readonly #keySets: Array<Set<string> | undefined> = [undefined];
  /** The depth of the `arrayKey` array's elements' container, and the element being read. */
  #target = -1;
  #items: number[] | undefined;
  #itemStart = 0;
  #itemExtra = 0;

  constructor(bytes: Uint8Array, arrayKey: string | undefined) {
    this.#b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
    this.#arrayKey = arrayKey;
  }

  run(): JsonTextScan {
    const b = this.#b;
    const n = b.length;
    let expectKey = false;
    let i = 0;
    while (i < n) {
      const c = b[i]!;
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x3a) {
        i++;
      } else if (c === 0x22) {
        let j = i + 1;
        let escaped = false;
        for (;;) {
          const d = b[j];
          // (undefined: text JSON.parse refused; never looped on.)
          if (d === 0x22 || d === undefined) break;
          if (d === 0x5c) {
            escaped = true;
            j += 2;
          } else j++;
        }
        if (expectKey) {
          this.#key(i + 1, j, escaped);
          expectKey = false;
        } else {
          this.#begin(i);
          this.#end(j);
        }
        i = j + 1;
      } else if (c === 0x2c) {
        if (this.#kind[this.#depth] === ARRAY) this.#index[this.#depth]!++;
        else expectKey = true;
        i++;
      } else if (c === 0x7b || c === 0x5b) {
        this.#begin(i);
        this.#open(c === 0x7b ? OBJECT : ARRAY);
        expectKey = c === 0x7b;
        i++;
      } else if (c === 0x7d || c === 0x5d) {
        // The `arrayKey` array itself ends: later arrays at its depth are not it.
        if (this.#depth === this.#target) this.#target = -1;
        this.#depth--;
        this.#end(i);
        expectKey = false;
        i++;
      } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
        // true, false, null
        const j = i + (c === 0x66 ? 5 : 4);
        this.#begin(i);
        this.#end(j - 1);
        i = j;
      } else {
        i = this.#number(i);
      }
    }
    return { violations: this.#violations, bytes: n + this.#extra, items: this.#items };
  }

  #begin(at: number): void {
    if (this.#depth === this.#target) {
      this.#itemStart = at;
      this.#itemExtra = this.#extra;
    }
  }

  /** A value ended at byte `last` (inclusive), at the current depth. */
  #end(last: number): void {
    if (this.#depth === this.#target) {
      this.#items!.push(last - this.#itemStart + 1 + this.#extra - this.#itemExtra);
    }
  }

  #open(kind: number): void {
    const d = ++this.#depth;
    this.#kind[d] = kind;
    this.#index[d] = 0;
    if (kind === OBJECT) {
      const ranges = this.#keyRanges[d];
      if (ranges === undefined) this.#keyRanges[d] = [];
      else ranges.length = 0;
      this.#keySets[d] = undefined;
    } else if (
      d === 2 &&
      this.#items === undefined &&
      this.#arrayKey !== undefined &&
      this.#kind[1] === OBJECT &&
      this.#keyText(1) === this.#arrayKey
    ) {
      this.#target = 2;
      this.#items = [];
    }
  }

  /** A key in bytes [start, end) of the object at the current depth. */
  #key(start: number, end: number, escaped: boolean): void {
    const d = this.#depth;
    this.#keyStart[d] = start;
    this.#keyEnd[d] = end;
    this.#keyEscaped[d] = escaped;
    if (this.#seen(d, start, end, escaped)) {
      const key = this.#keyText(d);
      this.#report(
        `the key ${JSON.stringify(key)} appears more than once in this object; JSON parsers keep only one of them silently, so duplicate keys are refused`,
      );
    }
  }

  /** True when the object at depth d already has this key; records it otherwise. */
  #seen(d: number, start: number, end: number, escaped: boolean): boolean {
    const ranges = this.#keyRanges[d]!;
    let set = this.#keySets[d];
    if (set === undefined && (escaped || ranges.length >= 2 * BYTE_KEYS)) {
      // Escapes make equal keys unequal as bytes: compare them decoded from here on.
      set = new Set();
      for (let x = 0; x < ranges.length; x += 2)
        set.add(this.#b.toString("utf8", ranges[x]!, ranges[x + 1]!));
      this.#keySets[d] = set;
    }
    if (set !== undefined) {
      const key = decode(this.#b, start, end, escaped);
      if (set.has(key)) return true;
      set.add(key);
      return false;
    }
    const b = this.#b;
    const len = end - start;
    for (let x = 0; x < ranges.length; x += 2) {
      const s = ranges[x]!;
      if (ranges[x + 1]! - s !== len) continue;
      let k = 0;
      while (k < len && b[s + k] === b[start + k]) k++;
      if (k === len) return true;
    }
    ranges.push(start, end);
    return false;
  }

  /** A number literal starting at i; returns the index after it. */
  #number(i: number): number {
    const b = this.#b;
    const start = i;
    let integer = true;
    let exponent = false;
    for (;;) {
      const c = b[i];
      if (c === undefined) break;
      if (c >= 0x30 && c <= 0x39) {
        i++;
      } else if (c === 0x2d || c === 0x2b) {
        i++;
      } else if (c === 0x2e) {
        integer = false;
        i++;
      } else if (c === 0x65 || c === 0x45) {
        integer = false;
        exponent = true;
        i++;
      } else break;
    }
    // Not a number: only a leading byte order mark (the UTF-8 decoder drops it before JSON.parse)
    // gets here. Skipped, so the scan always moves on.
    if (i === start) return i + 1;
    this.#begin(start);
    const len = i - start;
    // Integers up to 15 digits are safe; a literal without an exponent is only rewritten
    // shorter (`1.50` -> `1.5`) unless it is long enough to overflow.
    if ((integer && len >= 16) || exponent || len > 300) {
      const literal = b.toString("latin1", start, i);
      const problem = numberLiteralProblem(literal, "");
      if (problem !== undefined) this.#report(numberLiteralProblem(literal, this.#path())!);
      else if (!integer) {
        const grow = JSON.stringify(Number(literal)).length - len;
        if (grow > 0) this.#extra += grow;
      }
    }
    this.#end(i - 1);
    return i;
  }

  /** A violation at the current path (a key's own, or a value's key or index). */
  #report(description: string): void {
    if (this.#violations.length >= MAX_REPORTED_VIOLATIONS) return;
    this.#violations.push({ field: this.#path(), description });
  }

  /** The path of the current key or element: `batch[2].properties.n`. */
  #path(): string {
    let out = "";
    for (let d = 1; d <= this.#depth; d++) {
      if (this.#kind[d] === ARRAY) out += `[${this.#index[d]}]`;
      else out += d === 1 ? this.#keyText(d) : `.${this.#keyText(d)}`;
    }
    return out;
  }

  #keyText(d: number): string {
    return decode(this.#b, this.#keyStart[d]!, this.#keyEnd[d]!, this.#keyEscaped[d]!);
  }
}

/** The text of a JSON string's contents in bytes [start, end). */
function decode(b: Buffer, start: number, end: number, escaped: boolean): string {
  return escaped
    ? (JSON.parse(b.toString("utf8", start - 1, end + 1)) as string)
    : b.toString("utf8", start, end);
}
