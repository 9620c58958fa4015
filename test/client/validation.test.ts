import { Analytics, AnalyticsError, type AnalyticsErrorCode } from "@hookpost/client";
import { afterAll, describe, expect, it } from "vitest";
import { HOSTILE_MESSAGE_IDS } from "../helpers/hostile-ids.js";
import { thrown } from "../helpers/thrown.js";

// Refusals happen before the network: nothing listens at this endpoint. The calls that were
// accepted fail to deliver on close, which is expected here.
const a = new Analytics("wk", { endpoint: "127.0.0.1:9", flushAt: 1000, flushAfter: 60_000, maxRetries: 0 });
a.on("error", () => {});
afterAll(() => a.close({ timeoutMs: 1000 }));

function refusal(fn: () => unknown): AnalyticsError {
  return thrown(fn, AnalyticsError);
}

function expectRefused(fn: () => unknown, code: AnalyticsErrorCode, field?: string): void {
  const before = a.queued;
  const err = refusal(fn);
  expect(err.code).toBe(code);
  if (field !== undefined) expect(err.field).toBe(field);
  expect(err.calls).toEqual([]);
  expect(a.queued).toBe(before);
}

// Casts let the test pass what a JavaScript caller could.
const loose = a as unknown as Record<string, (params: unknown) => string>;

describe("validation at enqueue", () => {
  it("identify, track, page, screen and group need a userId or an anonymousId", () => {
    for (const type of ["identify", "track", "page", "screen", "group"]) {
      expectRefused(() => loose[type]!({ event: "E", groupId: "g" }), "invalid_call", "userId");
      expectRefused(
        () => loose[type]!({ userId: "", anonymousId: "", event: "E", groupId: "g" }),
        "invalid_call",
      );
      expect(loose[type]!({ anonymousId: "anon", event: "E", groupId: "g" })).toMatch(/-/);
    }
  });

  it("track needs an event", () => {
    expectRefused(() => loose.track!({ userId: "u" }), "invalid_call", "event");
    expectRefused(() => a.track({ userId: "u", event: "" }), "invalid_call", "event");
  });

  it("group needs a groupId", () => {
    expectRefused(() => loose.group!({ userId: "u" }), "invalid_call", "groupId");
  });

  it("alias needs a userId and a previousId", () => {
    expectRefused(() => loose.alias!({ previousId: "p" }), "invalid_call", "userId");
    expectRefused(() => loose.alias!({ anonymousId: "anon", previousId: "p" }), "invalid_call", "userId");
    expectRefused(() => loose.alias!({ userId: "u" }), "invalid_call", "previousId");
  });

  it("a messageId has at most 100 characters", () => {
    expectRefused(
      () => a.track({ userId: "u", event: "E", messageId: "m".repeat(101) }),
      "invalid_call",
      "messageId",
    );
    expect(a.track({ userId: "u", event: "E", messageId: "m".repeat(100) })).toBe("m".repeat(100));
  });

  it("message ids a header or a transport would alter are refused (issue 10 findings 1 and 2)", () => {
    for (const id of HOSTILE_MESSAGE_IDS) {
      expectRefused(() => a.track({ userId: "u", event: "E", messageId: id }), "invalid_call", "messageId");
      expect(refusal(() => a.track({ userId: "u", event: "E", messageId: id })).message).toContain(
        "printable ASCII",
      );
    }
    // Counted one way everywhere: "é" is one code point but refused by the alphabet, not the length.
    expect(a.track({ userId: "u", event: "E", messageId: "!~".repeat(50) })).toBe("!~".repeat(50));
  });

  it("timestamps: the contract's range and forms; __proto__ keys refused, not dropped", () => {
    expectRefused(
      () => a.track({ userId: "u", event: "E", timestamp: "10000-01-01T00:00:00Z" }),
      "invalid_call",
      "timestamp",
    );
    expectRefused(
      () => a.track({ userId: "u", event: "E", timestamp: new Date(Date.UTC(10000, 0, 1)) }),
      "invalid_call",
      "timestamp",
    );
    a.track({ userId: "u", event: "E", timestamp: "9999-12-31T23:59:59.999999999Z" });
    a.track({ userId: "u", event: "E", timestamp: "2026-11-21T15:00:00+05:30" });
    expectRefused(
      () => a.track({ userId: "u", event: "E", properties: JSON.parse('{"a":{"__proto__":{"x":1}}}') }),
      "invalid_call",
      "properties.a",
    );
  });

  it("one call encodes to at most 32 KiB", () => {
    expectRefused(
      () => a.track({ userId: "u", event: "E", properties: { blob: "x".repeat(33 * 1024) } }),
      "call_too_large",
    );
    const err = refusal(() => a.identify({ userId: "u", traits: { blob: "x".repeat(32 * 1024) } }));
    expect(err.message).toMatch(/32 KiB/);
    a.track({ userId: "u", event: "E", properties: { blob: "x".repeat(31 * 1024) } });
  });

  it("fields have their types, timestamps are valid, payloads are JSON", () => {
    expectRefused(() => loose.track!({ userId: 42, event: "E" }), "invalid_call", "userId");
    expectRefused(
      () => loose.track!({ userId: "u", event: "E", properties: [] }),
      "invalid_call",
      "properties",
    );
    expectRefused(
      () => loose.track!({ userId: "u", event: "E", integrations: { All: "no" } }),
      "invalid_call",
      "integrations.All",
    );
    expectRefused(
      () => a.track({ userId: "u", event: "E", timestamp: "yesterday-ish" }),
      "invalid_call",
      "timestamp",
    );
    expectRefused(
      () => a.track({ userId: "u", event: "E", timestamp: new Date(Number.NaN) }),
      "invalid_call",
      "timestamp",
    );
    expectRefused(
      () => a.track({ userId: "u", event: "E", properties: { n: 10n } }),
      "invalid_call",
      "properties.n",
    );
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expectRefused(
      () => a.identify({ userId: "u", traits: { cyclic } }),
      "invalid_call",
      "traits.cyclic.self",
    );
    expectRefused(() => loose.track!(null), "invalid_call");
  });

  it("numbers JSON cannot carry are refused with their path, not sent as null (issue 22 finding 7)", () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expectRefused(
        () => a.track({ userId: "u", event: "E", properties: { list: [1, { v: bad }] } }),
        "invalid_call",
        "properties.list[1].v",
      );
      expectRefused(() => a.screen({ userId: "u", context: { n: bad } }), "invalid_call", "context.n");
    }
    expect(refusal(() => a.identify({ userId: "u", traits: { n: Number.NaN } })).message).toMatch(
      /traits\.n is NaN/,
    );
    // Every finite double is a JSON number that parses back to itself: sent as is.
    a.track({ userId: "u", event: "E", properties: { big: 2 ** 60, tiny: 1e-7, neg: -0 } });
  });
});
