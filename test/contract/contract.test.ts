import { create, toBinary } from "@bufbuild/protobuf";
import {
  batchCallRanges,
  callSchemaByType,
  findLoss,
  InvalidTimestamp,
  MAX_TIMESTAMP_MS,
  messageIdProblem,
  parseIsoTimestamp,
  scanJsonText,
  timestampProblem,
  validateCall,
} from "@hookpost/contract";
import { BatchRequestSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { describe, expect, it } from "vitest";

describe("the message-id rule", () => {
  it("1..100 printable ASCII characters; names the offending character", () => {
    expect(messageIdProblem("abc-123_~!")).toBeUndefined();
    expect(messageIdProblem("x".repeat(100))).toBeUndefined();
    expect(messageIdProblem("x".repeat(101))).toMatch(/^is 101 characters long/);
    expect(messageIdProblem("cli-1 ")).toMatch(/^contains a space at character 6/);
    expect(messageIdProblem("\ufeffa")).toMatch(/^contains a byte order mark \(U\+FEFF\) at character 1/);
    expect(messageIdProblem("a\u00a0")).toMatch(/whitespace \(U\+00A0\)/);
    expect(messageIdProblem("日本-1")).toMatch(/"日" \(U\+65E5\) at character 1/);
    expect(messageIdProblem("😀")).toMatch(/U\+1F600/);
  });
});

describe("timestamps", () => {
  it("reads the SDK forms as UTC milliseconds, truncating below the millisecond", () => {
    const at = Date.parse("2026-11-21T09:30:00.000Z");
    expect(parseIsoTimestamp("2026-11-21T09:30:00Z")).toBe(at);
    expect(parseIsoTimestamp("2026-11-21T15:00:00+05:30")).toBe(at);
    expect(parseIsoTimestamp("2026-11-21T10:30:00+0100")).toBe(at);
    expect(parseIsoTimestamp("2026-11-21T07:30:00-02")).toBe(at);
    expect(parseIsoTimestamp("2026-11-21T09:30:00.999999999Z")).toBe(at + 999);
    expect(parseIsoTimestamp("9999-12-31T23:59:59.999999999Z")).toBe(MAX_TIMESTAMP_MS);
    expect(new Date(parseIsoTimestamp("0001-01-01T00:00:00Z") as number).toISOString()).toBe(
      "0001-01-01T00:00:00.000Z",
    );
  });

  it("refuses what is not a real time, or lies outside 0001..9999 in UTC", () => {
    for (const bad of [
      "2026-11-21",
      "2026-11-21T09:30:00",
      "2026-02-29T00:00:00Z",
      "2026-11-21T24:00:00Z",
      "x",
    ]) {
      expect(parseIsoTimestamp(bad), bad).toBeInstanceOf(InvalidTimestamp);
    }
    expect(timestampProblem(parseIsoTimestamp("9999-12-31T23:59:59-00:01"))).toMatch(/out of range/);
    expect(timestampProblem(parseIsoTimestamp("0001-01-01T00:00:00+00:01"))).toMatch(/out of range/);
    expect(timestampProblem(parseIsoTimestamp("2024-02-29T00:00:00Z"))).toBeUndefined();
  });
});

describe("rules", () => {
  it("name fields in the transport's spelling", () => {
    const call = { type: "alias" as const, messageId: "", userId: "", anonymousId: "" };
    expect(validateCall(call, "proto", "calls[2].").map((v) => v.field)).toEqual([
      "calls[2].user_id",
      "calls[2].previous_id",
    ]);
    expect(validateCall(call, "json", "batch[2].").map((v) => v.field)).toEqual([
      "batch[2].userId",
      "batch[2].previousId",
    ]);
  });
});

describe("sizes and losses from the bytes as sent", () => {
  it("finds each call's range in a BatchRequest", () => {
    const req = create(BatchRequestSchema, {
      calls: [
        { call: { case: "track", value: { userId: "u", event: "E", properties: { a: "x".repeat(300) } } } },
        { call: { case: "alias", value: { userId: "u", previousId: "p" } } },
      ],
    });
    const bytes = toBinary(BatchRequestSchema, req);
    const ranges = batchCallRanges(bytes);
    expect(ranges.map((r) => r.no)).toEqual([2, 6]);
    expect(ranges[1]!.end - ranges[1]!.start).toBe(6);
    expect(findLoss(callSchemaByType("track"), bytes, ranges[0]!.start, ranges[0]!.end)).toBeUndefined();
  });

  it("measures each element of a JSON batch as it arrived", () => {
    const text = '{"x":[1,2], "batch" : [ {"a":"],\\"}"} ,\n"s", 12 ,[[]] ], "y": {"batch": [1]}}';
    const sizes = (t: string) => scanJsonText(Buffer.from(t), "batch").items;
    expect(sizes(text)).toEqual([13, 3, 2, 4]);
    expect(sizes('{"batch":[]}')).toEqual([]);
    expect(sizes('{"other":[1]}')).toBeUndefined();
    // The key is compared unescaped; numbers count as they will be written (1e20: 21 digits).
    expect(sizes('{"b\\u0061tch":[{"n":1e20},true]}')).toEqual([10 + 17, 4]);
  });
});
