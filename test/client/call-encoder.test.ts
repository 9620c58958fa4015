import { create, fromBinary, type JsonObject, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { CallType } from "@hookpost/client";
import { batchRequestOf, type CallFields, CallTooLargeError, encodeFrame } from "@hookpost/client";
import { BatchCallSchema, BatchRequestSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { describe, expect, it } from "vitest";

// The hand-written encoder must write exactly what protobuf-es writes for the same call.

const TYPES: CallType[] = ["identify", "track", "page", "screen", "group", "alias"];

/** Deterministic pseudo-random numbers, so a failure reproduces. */
function rng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

const STRINGS = ["", "a", "ü", "日本語", "emoji 🎉", "x".repeat(200), 'quote " and \\ and \n'];

function randomJson(r: () => number, depth: number): JsonValue {
  const k = Math.floor(r() * (depth > 2 ? 4 : 7));
  switch (k) {
    case 0:
      return null;
    case 1:
      return [0, -0, 1, -1, 0.1, 1e300, -(2 ** 53), 2 ** 31, 123456.789][Math.floor(r() * 9)]!;
    case 2:
      return STRINGS[Math.floor(r() * STRINGS.length)]!;
    case 3:
      return r() < 0.5;
    case 4:
      return Array.from({ length: Math.floor(r() * 4) }, () => randomJson(r, depth + 1));
    default:
      return randomObject(r, depth + 1);
  }
}

function randomObject(r: () => number, depth: number): JsonObject {
  const out: JsonObject = {};
  const n = Math.floor(r() * 5);
  for (let i = 0; i < n; i++)
    out[i === 0 && r() < 0.2 ? "" : `k${i}_${STRINGS[i % STRINGS.length]}`] = randomJson(r, depth);
  return out;
}

const DATES = [
  new Date("2026-11-21T09:30:00.000Z"),
  new Date("2026-11-21T09:30:00.123Z"),
  new Date(0),
  new Date(999),
  new Date("1969-07-20T20:17:40.500Z"),
  new Date("1900-01-01T00:00:00.000Z"),
];

function randomCall(r: () => number): { type: CallType; fields: CallFields } {
  const type = TYPES[Math.floor(r() * TYPES.length)]!;
  const maybe = <T>(v: T) => (r() < 0.7 ? v : undefined);
  const fields: CallFields = {
    messageId: maybe(`id-${Math.floor(r() * 1e9)}`),
    userId: maybe(STRINGS[Math.floor(r() * STRINGS.length)]!),
    anonymousId: maybe("anon"),
    timestamp: maybe(DATES[Math.floor(r() * DATES.length)]!),
    context: maybe(randomObject(r, 0)),
    integrations: maybe({ All: r() < 0.5, Webhooks: true, "": false }),
    traits: maybe(randomObject(r, 0)),
    properties: maybe(randomObject(r, 0)),
    event: maybe("Order Completed"),
    name: maybe("Home"),
    category: maybe(""),
    groupId: maybe("g1"),
    previousId: maybe("p1"),
  };
  return { type, fields };
}

/** The same call through protobuf-es (only the fields this call type has). */
function reference(type: CallType, fields: CallFields): Uint8Array {
  const member = BatchCallSchema.fields.find((f) => f.localName === type)!;
  const value: Record<string, unknown> = {};
  for (const f of member.message!.fields) {
    const v = fields[f.localName];
    if (v === undefined) continue;
    value[f.localName] = v instanceof Date ? timestampFromDate(v) : v;
  }
  const call = create(BatchCallSchema, { call: { case: type, value } } as never);
  return toBinary(BatchRequestSchema, create(BatchRequestSchema, { calls: [call] }));
}

describe("call encoder", () => {
  it("writes the bytes protobuf-es writes, for 2000 varied calls", () => {
    const r = rng(42);
    for (let i = 0; i < 2000; i++) {
      const { type, fields } = randomCall(r);
      const ours = encodeFrame(type, fields, 32 * 1024);
      expect(Buffer.from(ours).toString("hex"), `call ${i} (${type})`).toBe(
        Buffer.from(reference(type, fields)).toString("hex"),
      );
    }
  });

  it("handles lengths that need multi-byte varints at every level", () => {
    for (const size of [126, 127, 128, 129, 16_383, 16_384, 30_000]) {
      const fields: CallFields = {
        userId: "u",
        event: "E",
        properties: { nested: { blob: "y".repeat(size) } },
      };
      expect(Buffer.from(encodeFrame("track", fields, 32 * 1024))).toEqual(
        Buffer.from(reference("track", fields)),
      );
    }
  });

  it("refuses a call over the limit, exactly at the limit", () => {
    const withBlob = (n: number): CallFields => ({
      userId: "u",
      event: "E",
      properties: { blob: "z".repeat(n) },
    });
    const callSize = (fields: CallFields) =>
      toBinary(BatchCallSchema, fromBinary(BatchRequestSchema, reference("track", fields)).calls[0]!).length;
    // The largest blob whose call protobuf-es encodes to at most 32 KiB.
    let n = 32 * 1024 - 64;
    while (callSize(withBlob(n + 1)) <= 32 * 1024) n++;
    expect(callSize(withBlob(n))).toBeLessThanOrEqual(32 * 1024);
    expect(() => encodeFrame("track", withBlob(n), 32 * 1024)).not.toThrow();
    expect(() => encodeFrame("track", withBlob(n + 1), 32 * 1024)).toThrow(CallTooLargeError);
    // A huge call is refused without being encoded in full.
    expect(() => encodeFrame("track", withBlob(10_000_000), 32 * 1024)).toThrow(CallTooLargeError);
  });

  it("frames concatenate into a valid BatchRequest", () => {
    const frames = TYPES.map((type, i) =>
      encodeFrame(
        type,
        { messageId: `m${i}`, userId: "u", event: "E", groupId: "g", previousId: "p" },
        32 * 1024,
      ),
    );
    const request = batchRequestOf(frames);
    const bytes = toBinary(BatchRequestSchema, request);
    expect(bytes.length).toBe(frames.reduce((n, f) => n + f.length, 0));
    const decoded = fromBinary(BatchRequestSchema, bytes);
    expect(decoded.calls.map((c) => [c.call.case, c.call.value?.messageId])).toEqual(
      TYPES.map((t, i) => [t, `m${i}`]),
    );
  });
});
