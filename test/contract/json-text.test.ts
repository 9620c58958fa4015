/**
 * The JSON text scan (packages/contract/src/json-text.ts): the byte-level fast path checked against a plain
 * recursive reader of the decoded text, on random JSON written the ways clients write it
 * (whitespace, escaped keys, repeated keys, big integers, exponents), plus the cases of issue 22.
 */

import {
  type JsonTextScan,
  MAX_REPORTED_VIOLATIONS,
  numberLiteralProblem,
  scanJsonText,
  type Violation,
} from "@hookpost/contract";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/** The reference: obviously right, slow (string slices, a Set per object, JSON.parse per key). */
function reference(t: string, arrayKey?: string): JsonTextScan {
  const violations: Violation[] = [];
  let extra = 0;
  let items: number[] | undefined;
  let i = 0;
  const report = (field: string, description: string) => {
    if (violations.length < MAX_REPORTED_VIOLATIONS) violations.push({ field, description });
  };
  const ws = () => {
    while (" \t\n\r".includes(t[i]!) && i < t.length) i++;
  };
  const str = (): string => {
    const s = i++;
    while (t[i] !== '"') i += t[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(t.slice(s, i)) as string;
  };
  const value = (path: string, collect?: number[]): void => {
    ws();
    const c = t[i]!;
    if (c === "{") {
      i++;
      const keys = new Set<string>();
      ws();
      if (t[i] === "}") i++;
      else {
        for (;;) {
          ws();
          const k = str();
          const p = path === "" ? k : `${path}.${k}`;
          if (keys.has(k)) report(p, `duplicate ${k}`);
          keys.add(k);
          ws();
          i++; // :
          ws();
          const target = path === "" && k === arrayKey && items === undefined && t[i] === "[";
          if (target) items = [];
          value(p, target ? items : undefined);
          ws();
          if (t[i++] === "}") break;
        }
      }
    } else if (c === "[") {
      i++;
      ws();
      let n = 0;
      if (t[i] === "]") i++;
      else {
        for (;;) {
          const extraAt = extra;
          ws();
          const s = i;
          value(`${path}[${n++}]`);
          if (collect) collect.push(Buffer.byteLength(t.slice(s, i)) + extra - extraAt);
          ws();
          if (t[i++] === "]") break;
        }
      }
    } else if (c === '"') {
      str();
    } else if ("tfn".includes(c)) {
      i += c === "f" ? 5 : 4;
    } else {
      const m = /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/.exec(t.slice(i))!;
      i += m[0].length;
      const problem = numberLiteralProblem(m[0], path);
      if (problem) report(path, problem);
      else extra += Math.max(0, JSON.stringify(Number(m[0])).length - m[0].length);
    }
  };
  value("");
  return { violations, bytes: Buffer.byteLength(t) + extra, items };
}

/** Violations compared by field, and by kind of description. */
const shape = (s: JsonTextScan) => ({
  ...s,
  violations: s.violations.map((v) => ({
    field: v.field,
    kind: /more than once|^duplicate/.test(v.description) ? "duplicate" : v.description,
  })),
});

const space = fc.constantFrom("", "", " ", "\n", "\t ", "\r\n  ");
/** Few names, so objects repeat keys; some written with \u escapes or as integer-like keys. */
const key = fc
  .tuple(fc.constantFrom("a", "b", "batch", "é", "1", "10", "__x", "a\u2028", "😀"), fc.boolean())
  .map(([name, escaped]) =>
    escaped
      ? `"${name
          .split("")
          .map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, "0")}`)
          .join("")}"`
      : JSON.stringify(name),
  );
const integer = fc.oneof(
  fc.integer().map(String),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  fc.bigInt({ min: 2n ** 53n - 4n, max: 2n ** 53n + 4n }).map((n) => (n % 2n ? `-${n}` : String(n))),
  fc.constantFrom("0", "-0", "9007199254740991", "-9007199254740991", "9007199254740992", "1".repeat(320)),
);
const float = fc
  .tuple(
    fc.oneof(fc.integer({ min: -999, max: 999 }).map(String), fc.constantFrom("-0", "0", "1")),
    fc.option(fc.stringMatching(/^[0-9]{1,20}$/), { nil: undefined }),
    fc.option(
      fc.tuple(fc.constantFrom("e", "E"), fc.constantFrom("", "+", "-"), fc.integer({ min: 0, max: 400 })),
      { nil: undefined },
    ),
  )
  .filter(([, frac, exp]) => frac !== undefined || exp !== undefined)
  .map(([int, frac, exp]) => `${int}${frac === undefined ? "" : `.${frac}`}${exp ? exp.join("") : ""}`);
const scalar = fc.oneof(
  integer,
  float,
  fc.constantFrom("true", "false", "null"),
  fc.string({ unit: "binary", maxLength: 8 }).map((s) => JSON.stringify(s)),
  fc.constantFrom('"a\\"b"', '"\\\\"', '"]},[{"'),
);
const { value } = fc.letrec<{ value: string; object: string; array: string }>((tie) => ({
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, scalar, tie("object"), tie("array")),
  object: fc
    .array(fc.tuple(space, key, space, tie("value"), space), { maxLength: 6 })
    .map((es) => `{${es.map(([a, k, b, v, c]) => `${a}${k}${b}:${c}${v}${a}`).join(",")}}`),
  array: fc
    .array(fc.tuple(space, tie("value")), { maxLength: 6 })
    .map((vs) => `[${vs.map(([s, v]) => `${s}${v}`).join(",")}]`),
}));
/** A top-level object, often with a `batch` array. */
const document = fc
  .tuple(
    fc.array(fc.tuple(key, value), { maxLength: 4 }),
    fc.option(fc.tuple(fc.constantFrom('"batch"', '"b\\u0061tch"'), fc.array(value, { maxLength: 5 }))),
  )
  .map(([es, batch]) => {
    const entries = es.map(([k, v]) => `${k}:${v}`);
    if (batch) entries.splice(es.length ? 1 : 0, 0, `${batch[0]} : [ ${batch[1].join(" , ")} ]`);
    return `{${entries.join(",")}}`;
  });

describe("the JSON text scan", () => {
  it("agrees with the reference reader on random JSON (fast-check)", () => {
    fc.assert(
      fc.property(document, (text) => {
        JSON.parse(text); // valid JSON by construction
        expect(shape(scanJsonText(Buffer.from(text), "batch"))).toEqual(shape(reference(text, "batch")));
      }),
      { numRuns: 3_000 },
    );
  });

  it("refuses duplicate keys after unescaping, naming the path (issue 22 finding 2)", () => {
    const text = '{"batch":[{"type":"track"}],"b\\u0061tch":[{"type":"track","event":"big"}]}';
    expect(scanJsonText(Buffer.from(text), "batch").violations).toEqual([
      {
        field: "batch",
        description:
          'the key "batch" appears more than once in this object; JSON parsers keep only one of them silently, so duplicate keys are refused',
      },
    ]);
    const nested = '{"batch":[{"a":1},{"properties":{"x":{"k":1,"k":2}}}]}';
    expect(scanJsonText(Buffer.from(nested)).violations.map((v) => v.field)).toEqual([
      "batch[1].properties.x.k",
    ]);
    // Past the byte comparison (more than 16 keys), still found.
    const many = `{${Array.from({ length: 40 }, (_, i) => `"k${i}":1`).join(",")},"k3":2}`;
    expect(scanJsonText(Buffer.from(many)).violations.map((v) => v.field)).toEqual(["k3"]);
  });

  it("ends on any bytes, even ones JSON.parse refuses (never loops)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }),
          document.map((d) => Buffer.from(d.slice(0, -3))),
        ),
        (bytes) => {
          try {
            scanJsonText(bytes, "batch");
          } catch {
            // Invalid JSON may throw; it is never scanned in practice (parsed first).
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it("skips a leading byte order mark (which the UTF-8 decoder drops before JSON.parse)", () => {
    const text = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"batch":[{"a":1}],"n":1}')]);
    expect(scanJsonText(text, "batch")).toEqual({ violations: [], bytes: text.length, items: [7] });
  });

  it("refuses integers beyond ±(2^53 - 1) and overflowing numbers, naming the path (finding 7)", () => {
    const text =
      '{"properties":{"n":9007199254740993,"ok":9007199254740991,"f":1.5e3,"deep":[{"m":-9007199254740993}],"inf":1e400}}';
    const { violations } = scanJsonText(Buffer.from(text));
    expect(violations.map((v) => v.field)).toEqual([
      "properties.n",
      "properties.deep[0].m",
      "properties.inf",
    ]);
    expect(violations[0]!.description).toMatch(/9007199254740993.*it would arrive as 9007199254740992/);
    expect(violations[2]!.description).toMatch(/overflows/);
  });
});
