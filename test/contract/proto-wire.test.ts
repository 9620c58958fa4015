/**
 * The fast path of gRPC call requests (packages/contract/src/proto-wire.ts) against the full path it stands
 * in for (protobuf-es `fromBinary`, the lost-map-key scan, the contract's proto rules and
 * `fromProtoCall`): on random requests, random mutations of them and hand-made unusual
 * encodings, whatever the fast path accepts, the full path accepts as the same stored call
 * (the same JSON bytes on EVENTS). What it does not take goes the full path, so it can never
 * answer differently; and it must take the ordinary requests, or it would be no fast path.
 */
import {
  create,
  type DescMessage,
  fromBinary,
  type JsonObject,
  type JsonValue,
  toBinary,
} from "@bufbuild/protobuf";
import {
  acceptedBatchCalls,
  acceptedCall,
  CALL_TYPES,
  type CallType,
  type ContractCall,
  callSchemaByType,
  fromProtoCall,
  MAX_CALL_BYTES,
  type ProtoCall,
  protoBatchViolations,
  protoCallViolations,
  toStoredCall,
} from "@hookpost/contract";
import { BatchRequestSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { lostMapKeys } from "@hookpost/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/** Longer fuzzing: `FUZZ_RUNS=20 npx vitest run test/contract/proto-wire.test.ts` (20 times the runs). */
const RUNS = Number(process.env.FUZZ_RUNS ?? 1);
const STAMP = { sourceId: "src_1", receivedAt: new Date("2026-11-21T09:30:00.000Z") };
const MAX_CALLS = 20;

/** The stored calls as JSON (a generated message id made fixed), as EVENTS would get them. */
function stored(calls: ContractCall[]): string {
  return JSON.stringify(
    calls.map((c) => toStoredCall({ ...c, messageId: c.messageId || "generated" }, STAMP)),
  );
}

/** The full path: what ingest answered before the fast path ("refused" or the stored calls). */
function full(schema: DescMessage, bytes: Uint8Array, type?: CallType): string {
  let decoded: unknown;
  try {
    decoded = fromBinary(schema, bytes);
  } catch {
    return "refused";
  }
  try {
    if (lostMapKeys(schema, bytes).length > 0) return "refused";
  } catch {
    return "refused"; // lib/grpc/server.ts answers INVALID_ARGUMENT
  }
  if (type !== undefined) {
    const call = { case: type, value: decoded } as ProtoCall;
    return protoCallViolations(call, bytes).length > 0 ? "refused" : stored([fromProtoCall(call)]);
  }
  const req = decoded as Parameters<typeof protoBatchViolations>[0];
  if (protoBatchViolations(req, bytes, MAX_CALLS).length > 0) return "refused";
  return stored(req.calls.map((bc) => fromProtoCall(bc.call as ProtoCall)));
}

/** The fast path: the stored calls, or undefined when it leaves the request to the full path. */
function fast(bytes: Uint8Array, type?: CallType): string | undefined {
  if (type !== undefined) {
    const call = acceptedCall(type, bytes);
    return call && stored([call]);
  }
  const calls = acceptedBatchCalls(bytes, MAX_CALLS);
  return calls && stored(calls);
}

/** Both paths on the same bytes: the fast one agrees whenever it answers. */
function agree(schema: DescMessage, bytes: Uint8Array, type?: CallType): { fast: boolean; full: string } {
  const f = fast(bytes, type);
  const expected = full(schema, bytes, type);
  if (f !== undefined) expect(f).toBe(expected);
  return { fast: f !== undefined, full: expected };
}

/** agree(), and an ordinary (canonical) request the full path accepts is taken; true when taken. */
function takenWhenCanonical(schema: DescMessage, bytes: Uint8Array, type?: CallType): boolean {
  const r = agree(schema, bytes, type);
  if (r.full !== "refused" && !hasLoss(bytes)) expect(r.fast, r.full).toBe(true);
  return r.fast;
}

const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 20 }) },
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.string({ unit: "grapheme", maxLength: 8 }),
  fc.constantFrom("", "__proto__", "\ufeffx", "x\ufeff", "constructor", "toString", "0", "10", "é", "\u0000"),
);
const id = fc.oneof(fc.stringMatching(/^[\x21-\x7e]{1,30}$/), text);
const json: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    fc.integer(),
    text,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(text, tie("value"), { maxKeys: 4 }),
  ),
})).value;
const object = fc.dictionary(text, json, { maxKeys: 5 }) as fc.Arbitrary<JsonObject>;
const timestamp = fc.record({
  seconds: fc.oneof(
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    fc.bigInt({ min: 0n, max: 2n ** 34n }),
  ),
  nanos: fc.oneof(
    fc.integer({ min: 0, max: 999_999_999 }),
    fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  ),
});

/** A call of any type, fields of other types left to the type's schema to ignore. */
const call = fc.record(
  {
    type: fc.constantFrom(...CALL_TYPES),
    messageId: id,
    userId: id,
    anonymousId: id,
    timestamp,
    context: object,
    integrations: fc.dictionary(text, fc.boolean(), { maxKeys: 3 }),
    event: text,
    name: text,
    category: text,
    groupId: id,
    previousId: id,
    properties: object,
    traits: object,
  },
  { requiredKeys: ["type"] },
);
/** Mostly calls the rules accept (random objects may still hold NaN, deep nesting, ...). */
const goodCall = fc
  .tuple(call, fc.stringMatching(/^[\x21-\x7e]{1,30}$/))
  .map(([c, ok]) => ({ ...c, messageId: ok, userId: ok, event: ok, groupId: ok, previousId: ok }));
type CallInit = typeof call extends fc.Arbitrary<infer T> ? T : never;

function init(c: CallInit) {
  const { type, ...fields } = c;
  const schema = callSchemaByType(type);
  // Only the type's own fields (create ignores none of them silently otherwise).
  const own = Object.fromEntries(
    Object.entries(fields).filter(([k]) => schema.fields.some((f) => f.localName === k)),
  );
  return { type, schema, value: own };
}

function encodeCall(c: CallInit): { type: CallType; schema: DescMessage; bytes: Uint8Array } {
  const { type, schema, value } = init(c);
  return { type, schema, bytes: toBinary(schema, create(schema, value as never)) };
}

function encodeBatch(calls: CallInit[]): Uint8Array {
  return toBinary(
    BatchRequestSchema,
    create(BatchRequestSchema, {
      calls: calls.map((c) => {
        const { type, value } = init(c);
        return { call: { case: type, value } } as never;
      }),
    }),
  );
}

/** A few random changes: bytes overwritten, cut, inserted, or a stretch repeated. */
const mutation = fc.array(
  fc.tuple(
    fc.constantFrom("set", "cut", "insert", "repeat"),
    fc.nat(),
    fc.nat(),
    fc.integer({ min: 0, max: 255 }),
  ),
  { minLength: 1, maxLength: 3 },
);

function mutate(bytes: Uint8Array, changes: Array<[string, number, number, number]>): Uint8Array {
  let out = Buffer.from(bytes);
  for (const [kind, a, b, byte] of changes) {
    const at = out.length === 0 ? 0 : a % out.length;
    if (kind === "set" && out.length > 0) out[at] = byte;
    else if (kind === "cut") out = Buffer.concat([out.subarray(0, at), out.subarray(at + 1 + (b % 4))]);
    else if (kind === "insert")
      out = Buffer.concat([out.subarray(0, at), Buffer.from([byte]), out.subarray(at)]);
    else if (kind === "repeat") {
      const end = Math.min(out.length, at + 1 + (b % 40));
      out = Buffer.concat([out.subarray(0, end), out.subarray(at, end), out.subarray(end)]);
    }
  }
  return out;
}

/** Whether the bytes hold what the fast path always leaves to the full path. */
const hasLoss = (bytes: Uint8Array) =>
  Buffer.from(bytes).includes("__proto__") || Buffer.from(bytes).includes(Buffer.from([0xef, 0xbb, 0xbf]));

describe("the fast path of call requests agrees with protobuf-es and the full rules", () => {
  it("unary calls: random calls are stored alike, and the valid ones take the fast path", () => {
    let fastCount = 0;
    fc.assert(
      fc.property(call, (c) => {
        const { type, schema, bytes } = encodeCall(c);
        if (takenWhenCanonical(schema, bytes, type)) fastCount++;
      }),
      { numRuns: 3000 * RUNS },
    );
    expect(fastCount).toBeGreaterThan(100);
  });

  it("batches: random batches are stored alike, all-or-nothing", () => {
    let fastCount = 0;
    fc.assert(
      // Half short batches of mostly-good calls: one bad call refuses a whole batch, and long
      // mixed ones alone took the fast path too rarely (19 of 600 once) for the count below.
      fc.property(
        fc.oneof(
          fc.array(goodCall, { minLength: 1, maxLength: 3 }),
          fc.array(fc.oneof(goodCall, goodCall, call), { maxLength: MAX_CALLS + 2 }),
        ),
        (calls) => {
          if (takenWhenCanonical(BatchRequestSchema, encodeBatch(calls))) fastCount++;
        },
      ),
      { numRuns: 600 * RUNS },
    );
    expect(fastCount).toBeGreaterThan(20);
  });

  it("mutated requests: whatever the fast path takes, protobuf-es reads the same", () => {
    let fastCount = 0;
    fc.assert(
      fc.property(fc.oneof(goodCall, call), mutation, (c, changes) => {
        const { type, schema, bytes } = encodeCall(c);
        if (agree(schema, mutate(bytes, changes), type).fast) fastCount++;
      }),
      { numRuns: 5000 * RUNS },
    );
    fc.assert(
      fc.property(fc.array(goodCall, { minLength: 1, maxLength: 4 }), mutation, (calls, changes) => {
        if (agree(BatchRequestSchema, mutate(encodeBatch(calls), changes)).fast) fastCount++;
      }),
      { numRuns: 3000 * RUNS },
    );
    // Some mutations keep a valid request (a changed character, a cut value): taken and compared.
    expect(fastCount).toBeGreaterThan(20 * RUNS);
  });

  it("fields in any order, some repeated: read alike or left to the full path", () => {
    let fastCount = 0;
    fc.assert(
      fc.property(goodCall, fc.array(fc.nat(), { maxLength: 12 }), fc.boolean(), (c, picks, inBatch) => {
        const { type, schema, value } = init(c);
        // One encoded field each (a message's encoding is the concatenation of its fields').
        const fields = Object.entries(value)
          .map(([k, v]) => toBinary(schema, create(schema, { [k]: v } as never)))
          .filter((b) => b.length > 0);
        if (fields.length === 0) return;
        const order = picks.length > 0 ? picks.map((p) => fields[p % fields.length]!) : fields;
        const bytes = Buffer.concat(order);
        if (!inBatch) {
          if (agree(schema, bytes, type).fast) fastCount++;
          return;
        }
        const member = CALL_TYPES.indexOf(type) + 1;
        const batchCall = Buffer.concat([tagAndLength(member, bytes.length), bytes]);
        const req = Buffer.concat([tagAndLength(1, batchCall.length), batchCall]);
        if (agree(BatchRequestSchema, req).fast) fastCount++;
      }),
      { numRuns: 3000 * RUNS },
    );
    // About 350 of 3000 per run: a bound the count clears by far, so it fails only when the fast path stops being taken.
    expect(fastCount).toBeGreaterThan(200 * RUNS);
  });

  it("unusual but valid encodings are left to the full path or read alike", () => {
    const base = encodeCall({ type: "track", userId: "u", event: "E", properties: { a: 1 } });
    const withTs = encodeCall({
      type: "track",
      userId: "u",
      event: "E",
      timestamp: { seconds: 5n, nanos: 7 },
    });
    const cases: Uint8Array[] = [
      // Every field twice: protobuf-es keeps the last strings and merges the Structs.
      Buffer.concat([base.bytes, base.bytes]),
      Buffer.concat([withTs.bytes, withTs.bytes]),
      // An unknown field (number 15, varint; number 20, length-delimited).
      Buffer.concat([base.bytes, Buffer.from([0x78, 0x01])]),
      Buffer.concat([base.bytes, Buffer.from([0xa2, 0x01, 0x01, 0x41])]),
      // A string with a varint wire type; a tag written in two bytes.
      Buffer.concat([base.bytes, Buffer.from([0x38, 0x01])]),
      Buffer.concat([Buffer.from([0x92, 0x00, 0x01, 0x75]), Buffer.from(base.bytes).subarray(3)]),
      // A Value with two kinds (number, then string): protobuf-es keeps the last.
      Buffer.concat([
        Buffer.from(base.bytes).subarray(0, 0),
        structField(8, "a", Buffer.from([0x11, ...f64(1), 0x1a, 0x01, 0x62])),
        Buffer.from([0x12, 0x01, 0x75, 0x3a, 0x01, 0x45]),
      ]),
      // A Value with no kind (null), a Struct entry without key or value.
      Buffer.concat([
        structField(8, "a", Buffer.alloc(0)),
        Buffer.from([0x12, 0x01, 0x75, 0x3a, 0x01, 0x45]),
      ]),
      Buffer.concat([
        Buffer.from([0x42, 0x02, 0x0a, 0x00]),
        Buffer.from([0x12, 0x01, 0x75, 0x3a, 0x01, 0x45]),
      ]),
      // A length written in more bytes than needed.
      Buffer.from([0x12, 0x81, 0x00, 0x75, 0x3a, 0x01, 0x45]),
      // Invalid UTF-8 (refused by protobuf-es), an overlong encoding, a lone surrogate.
      Buffer.from([0x12, 0x02, 0xc3, 0x28, 0x3a, 0x01, 0x45]),
      Buffer.from([0x12, 0x02, 0xc0, 0xaf, 0x3a, 0x01, 0x45]),
      Buffer.from([0x12, 0x03, 0xed, 0xa0, 0x80, 0x3a, 0x01, 0x45]),
      // Integrations: an entry without a value, one with the value first, a repeated key.
      Buffer.concat([base.bytes, Buffer.from([0x32, 0x03, 0x0a, 0x01, 0x41])]),
      Buffer.concat([base.bytes, Buffer.from([0x32, 0x05, 0x10, 0x01, 0x0a, 0x01, 0x41])]),
      Buffer.concat([
        base.bytes,
        Buffer.from([0x32, 0x05, 0x0a, 0x01, 0x41, 0x10, 0x01, 0x32, 0x05, 0x0a, 0x01, 0x41, 0x10, 0x00]),
      ]),
      // A bool as a 10-byte varint; nanos negative (10 bytes).
      Buffer.concat([
        base.bytes,
        Buffer.from([
          0x32, 0x0e, 0x0a, 0x01, 0x41, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
        ]),
      ]),
      encodeCall({ type: "track", userId: "u", event: "E", timestamp: { seconds: -1n, nanos: -1 } }).bytes,
    ];
    for (const bytes of cases) agree(callSchemaByType("track"), bytes, "track");
  });

  it("nesting: at most 32 levels are taken, deeper is refused by the full path", () => {
    for (const depth of [31, 32, 33, 40, 200]) {
      let v: JsonValue = "leaf";
      for (let i = 1; i < depth; i++) v = i % 2 ? { k: v } : [v];
      const { schema, bytes } = encodeCall({ type: "identify", userId: "u", traits: { t: v } as JsonObject });
      const r = agree(schema, bytes, "identify");
      expect(r.full === "refused", String(depth)).toBe(depth > 32);
      expect(r.fast, String(depth)).toBe(depth <= 32);
    }
  });

  it("sizes: a call over MAX_CALL_BYTES goes the full path and is refused", () => {
    const big = encodeCall({
      type: "track",
      userId: "u",
      event: "E",
      properties: { a: "x".repeat(MAX_CALL_BYTES) },
    });
    expect(agree(big.schema, big.bytes, "track")).toEqual({ fast: false, full: "refused" });
    const batch = encodeBatch([
      { type: "track", userId: "u", event: "E", properties: { a: "x".repeat(MAX_CALL_BYTES) } },
    ]);
    expect(agree(BatchRequestSchema, batch)).toEqual({ fast: false, full: "refused" });
  });
});

/** A length-delimited field's tag and length. */
function tagAndLength(no: number, length: number): Buffer {
  const out = [(no << 3) | 2];
  for (let n = length; ; n = Math.floor(n / 128)) {
    out.push(n >= 128 ? (n % 128) | 0x80 : n);
    if (n < 128) break;
  }
  return Buffer.from(out);
}

function f64(n: number): number[] {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(n);
  return [...b];
}

/** A call field `no` holding a Struct with one entry `key` -> the Value bytes given. */
function structField(no: number, key: string, value: Buffer): Buffer {
  const k = Buffer.from(key);
  const entry = Buffer.concat([Buffer.from([0x0a, k.length]), k, Buffer.from([0x12, value.length]), value]);
  const struct = Buffer.concat([Buffer.from([0x0a, entry.length]), entry]);
  return Buffer.concat([Buffer.from([(no << 3) | 2, struct.length]), struct]);
}
