import {
  type AttemptRecord,
  deliveredJson,
  deliveredRecord,
  type RoutedRecord,
  storedRecordsOf,
} from "@hookpost/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/**
 * The one attempt-log message of a call delivered directly to its only destination
 * (docs/design/attempt-log-messages.md) is written by `deliveredJson` without building the merged
 * record; it must be exactly the text of `JSON.stringify(deliveredRecord(...))`, which readers
 * split (`storedRecordsOf`), for any record the dispatcher writes.
 */

const unit = fc.constantFrom("a", "é", "😀", "\ud83d", '"', "\\", "\n", "\u0000", " ");
const text = fc.string({ unit, maxLength: 16 });
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

const attempt: fc.Arbitrary<AttemptRecord> = fc
  .record({
    messageId: text,
    destinationId: text,
    sourceId: text,
    url: text,
    attemptNumber: fc.integer({ min: 1, max: 100 }),
    startTime: fc.constant("2026-11-29T05:00:00.000Z"),
    durationMs: fc.integer({ min: 0, max: 60_000 }),
    outcome: fc.constantFrom("success" as const, "server_error" as const),
    status: fc.integer({ min: 0, max: 599 }),
    reason: text,
    retryable: fc.boolean(),
    responseBody: text,
    userHash: opt(fc.stringMatching(/^[0-9a-f]{32}$/)),
    callType: opt(fc.constantFrom("track", "identify")),
    event: opt(text),
    urlIndex: opt(fc.integer({ min: 0, max: 4 })),
    firstTime: opt(fc.constant("2026-11-29T04:00:00.000Z")),
  })
  .map((r) => {
    // As the dispatcher writes records: optional fields absent, not undefined.
    const out: Record<string, unknown> = { kind: "attempt" };
    for (const [k, v] of Object.entries(r)) if (v !== undefined) out[k] = v;
    return out as unknown as AttemptRecord;
  });

const routed = (a: AttemptRecord, body: string | undefined, destinations: string[]): RoutedRecord => ({
  kind: "routed",
  messageId: a.messageId,
  sourceId: a.sourceId,
  callType: "track",
  receivedAt: "2026-11-29T04:59:59.000Z",
  time: "2026-11-29T05:00:00.001Z",
  destinations,
  filtered: false,
  ...(body === undefined ? {} : { body }),
});

describe("a direct delivery's attempt-log message", () => {
  it("is the text of the merged record, and reads back as both records", () => {
    fc.assert(
      fc.property(attempt, opt(text), fc.array(text, { minLength: 1, maxLength: 3 }), (a, body, dests) => {
        const r = routed(a, body, dests);
        const json = deliveredJson(r, a);
        expect(json).toBe(JSON.stringify(deliveredRecord(r, a)));
        const records = storedRecordsOf({ ...JSON.parse(json), sequence: 7 });
        expect(records.map((x) => x.kind)).toEqual(["routed", "attempt"]);
      }),
      { numRuns: 500 },
    );
  });
});
