import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@hookpost/contract";
import { EVENTS_STREAM, eventSubject } from "@hookpost/core";
import { beforeAll, describe, expect, it } from "vitest";
import { HOSTILE_MESSAGE_IDS } from "../helpers/hostile-ids.js";
import { failure, fields, type IngestClient, useHarness } from "./harness.js";

const h = useHarness();
let src: { id: string; writeKey: string; client: IngestClient };

beforeAll(async () => {
  src = await h.source("website");
});

const TS = new Date("2026-11-21T09:30:00.123Z");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Sends one call and returns what was stored for it, checking the receive time. */
async function roundTrip(send: () => Promise<{ messageId: string }>) {
  const before = Date.now();
  const { messageId } = await send();
  const after = Date.now();
  const stored = await h.find(messageId);
  expect(stored, `message ${messageId} is stored`).toBeDefined();
  const receivedAt = Date.parse(stored!.call.receivedAt);
  expect(receivedAt).toBeGreaterThanOrEqual(before - 1);
  expect(receivedAt).toBeLessThanOrEqual(after + 1);
  return { messageId, ...stored! };
}

describe("stored calls match StoredCall exactly", () => {
  it("identify: every field the caller sent, nothing else", async () => {
    // Stored as sent (the Structs as JSON objects, nulls in lists kept).
    const sent = {
      userId: "u1",
      anonymousId: "a1",
      context: { ip: "10.0.0.1", app: { name: "shop", build: 42 } },
      integrations: { All: false, Webhooks: true },
      traits: { email: "a@example.com", plan: "pro", logins: 3, vip: true, tags: ["x", null] },
    };
    const s = await roundTrip(() =>
      src.client.identify({ messageId: "id-1", timestamp: timestampFromDate(TS), ...sent }),
    );
    expect(s.subject).toBe(eventSubject(src.id, "identify"));
    expect(s.msgId).toBe(`${src.id}:id-1`);
    expect(s.call).toStrictEqual({
      type: "identify",
      messageId: "id-1",
      sourceId: src.id,
      receivedAt: s.call.receivedAt,
      timestamp: "2026-11-21T09:30:00.123Z",
      ...sent,
    });
    expect(s.call.receivedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("track", async () => {
    const s = await roundTrip(() =>
      src.client.track({ userId: "u1", event: "Signed Up", properties: { plan: "pro", price: 9.5 } }),
    );
    expect(s.subject).toBe(eventSubject(src.id, "track"));
    expect(s.call).toStrictEqual({
      type: "track",
      messageId: s.messageId,
      sourceId: src.id,
      receivedAt: s.call.receivedAt,
      timestamp: s.call.receivedAt,
      userId: "u1",
      event: "Signed Up",
      properties: { plan: "pro", price: 9.5 },
    });
  });

  it("page", async () => {
    const sent = {
      anonymousId: "anon-7",
      name: "Pricing",
      category: "Docs",
      properties: { url: "https://example.com/pricing", title: "Pricing", referrer: "", path: "/pricing" },
    };
    const s = await roundTrip(() => src.client.page({ ...sent, timestamp: timestampFromDate(TS) }));
    expect(s.call).toStrictEqual({
      type: "page",
      messageId: s.messageId,
      sourceId: src.id,
      receivedAt: s.call.receivedAt,
      timestamp: "2026-11-21T09:30:00.123Z",
      ...sent,
    });
  });

  it("screen", async () => {
    const context = { device: { model: "iPhone", type: "ios" }, os: { name: "iOS", version: "18" } };
    const s = await roundTrip(() => src.client.screen({ userId: "u2", name: "Home", context }));
    expect(s.call).toStrictEqual({
      type: "screen",
      messageId: s.messageId,
      sourceId: src.id,
      receivedAt: s.call.receivedAt,
      timestamp: s.call.receivedAt,
      userId: "u2",
      context,
      name: "Home",
    });
  });

  it("group", async () => {
    const s = await roundTrip(() =>
      src.client.group({ userId: "u3", groupId: "g1", traits: { "Company Name": "ACME", seats: 12 } }),
    );
    expect(s.call).toStrictEqual({
      type: "group",
      messageId: s.messageId,
      sourceId: src.id,
      receivedAt: s.call.receivedAt,
      timestamp: s.call.receivedAt,
      userId: "u3",
      traits: { "Company Name": "ACME", seats: 12 },
      groupId: "g1",
    });
  });

  it("alias", async () => {
    const s = await roundTrip(() => src.client.alias({ userId: "u4", previousId: "anon-4" }));
    expect(s.call).toStrictEqual({
      type: "alias",
      messageId: s.messageId,
      sourceId: src.id,
      receivedAt: s.call.receivedAt,
      timestamp: s.call.receivedAt,
      userId: "u4",
      previousId: "anon-4",
    });
  });

  it("generates a UUID message id when none is given and never writes null", async () => {
    const s = await roundTrip(() => src.client.track({ anonymousId: "a", event: "e" }));
    expect(s.messageId).toMatch(UUID);
    expect(s.raw).not.toContain("null");
    expect(s.call.timestamp).toBe(s.call.receivedAt);
    // An empty Struct the caller did send is kept as an empty object.
    const e = await roundTrip(() => src.client.track({ anonymousId: "a", event: "e", properties: {} }));
    expect(e.call.properties).toStrictEqual({});
  });

  it("a call is in the stream when its answer arrives", async () => {
    const { messageId } = await src.client.track({ userId: "u9", event: "Checked Out" });
    const m = await h.jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: eventSubject(src.id, "track") });
    expect(m.json<{ messageId: string }>().messageId).toBe(messageId);
  });
});

describe("deduplication", () => {
  it("stores a repeated message id once and answers both times", async () => {
    const before = await h.messageCount();
    const a = await src.client.track({ messageId: "dup-1", userId: "u1", event: "Paid" });
    const b = await src.client.track({ messageId: "dup-1", userId: "u1", event: "Paid" });
    expect(a.messageId).toBe("dup-1");
    expect(b.messageId).toBe("dup-1");
    const batch = await src.client.batch({
      calls: [{ call: { case: "track", value: { messageId: "dup-1", userId: "u1", event: "Paid" } } }],
    });
    expect(batch.messageIds).toEqual(["dup-1"]);
    expect(await h.messageCount()).toBe(before + 1);
    expect((await h.stored()).filter((s) => s.call.messageId === "dup-1")).toHaveLength(1);
  });

  it("the same message id from two sources is two calls", async () => {
    const other = await h.source("other");
    const before = await h.messageCount();
    await src.client.track({ messageId: "shared-id", userId: "u1", event: "x" });
    await other.client.track({ messageId: "shared-id", userId: "u1", event: "x" });
    expect(await h.messageCount()).toBe(before + 2);
  });
});

describe("batch", () => {
  it("stores every call and answers the message ids in order", async () => {
    const res = await src.client.batch({
      calls: [
        { call: { case: "identify", value: { userId: "b1", traits: { a: 1 } } } },
        { call: { case: "track", value: { messageId: "batch-2", userId: "b1", event: "E" } } },
        { call: { case: "page", value: { userId: "b1", name: "P" } } },
        { call: { case: "screen", value: { userId: "b1", name: "S" } } },
        { call: { case: "group", value: { userId: "b1", groupId: "G" } } },
        { call: { case: "alias", value: { userId: "b1", previousId: "b0" } } },
      ],
    });
    expect(res.messageIds).toHaveLength(6);
    expect(res.messageIds[1]).toBe("batch-2");
    const stored = await h.stored();
    const types = res.messageIds.map((id) => stored.find((s) => s.call.messageId === id)?.call.type);
    expect(types).toEqual(["identify", "track", "page", "screen", "group", "alias"]);
    const received = new Set(
      res.messageIds.map((id) => stored.find((s) => s.call.messageId === id)?.call.receivedAt),
    );
    expect(received.size).toBe(1);
  });

  it("accepts a batch just under 500 KiB (the transport does not refuse it)", async () => {
    const blob = "x".repeat(24 * 1024);
    const calls = Array.from({ length: 20 }, (_, i) => ({
      call: { case: "track" as const, value: { userId: `big-${i}`, event: "Big", properties: { blob } } },
    }));
    const res = await src.client.batch({ calls });
    expect(res.messageIds).toHaveLength(20);
  });
});

describe("validation", () => {
  /** Expects INVALID_ARGUMENT naming exactly these fields, and nothing stored. */
  async function rejected(send: () => Promise<unknown>, expected: string[]) {
    const before = await h.messageCount();
    const err = await failure(send());
    expect(err.code, err.message).toBe(Code.INVALID_ARGUMENT);
    expect(fields(err)).toEqual(expected);
    expect(err.message).toMatch(/^invalid request: /);
    expect(await h.messageCount()).toBe(before);
    return err;
  }

  it("identify/track/page/screen/group need user_id or anonymous_id", async () => {
    const c = src.client;
    const e = await rejected(() => c.identify({ traits: { a: 1 } }), ["user_id"]);
    expect(e.fieldViolations[0]!.description).toBe("an identify call needs a user_id or an anonymous_id");
    await rejected(() => c.track({ event: "x" }), ["user_id"]);
    await rejected(() => c.page({ name: "x" }), ["user_id"]);
    await rejected(() => c.screen({ name: "x" }), ["user_id"]);
    await rejected(() => c.group({ groupId: "g" }), ["user_id"]);
  });

  it("track needs event, group needs group_id, alias needs user_id and previous_id", async () => {
    await rejected(() => src.client.track({ userId: "u" }), ["event"]);
    await rejected(() => src.client.track({}), ["user_id", "event"]);
    await rejected(() => src.client.group({ userId: "u" }), ["group_id"]);
    await rejected(() => src.client.alias({}), ["user_id", "previous_id"]);
    await rejected(() => src.client.alias({ anonymousId: "a", previousId: "p" }), ["user_id"]);
    await rejected(() => src.client.alias({ userId: "u" }), ["previous_id"]);
  });

  it("message_id: 1..100 printable ASCII characters (0x21-0x7E), refused otherwise, never rewritten", async () => {
    const longest = "!~".repeat(50);
    const ok = await src.client.track({ messageId: longest, userId: "u", event: "e" });
    expect(ok.messageId).toBe(longest);
    await rejected(
      () => src.client.track({ messageId: "m".repeat(101), userId: "u", event: "e" }),
      ["message_id"],
    );
    await rejected(() => src.client.track({ messageId: "a\r\nb", userId: "u", event: "e" }), ["message_id"]);
    // Issue 10 findings 1 and 2: ids a header cannot carry or a transport would trim.
    for (const id of HOSTILE_MESSAGE_IDS) {
      const e = await rejected(
        () => src.client.track({ messageId: id, userId: "u", event: "e" }),
        ["message_id"],
      );
      expect(e.message).toMatch(/printable ASCII|byte order mark/);
    }
  });

  it("timestamps outside the Timestamp range and bad nanos are refused", async () => {
    const far = { seconds: 300_000_000_000n, nanos: 0 };
    const e = await rejected(
      () => src.client.track({ userId: "u", event: "e", timestamp: far }),
      ["timestamp"],
    );
    expect(e.message).toContain("out of range");
    await rejected(
      () => src.client.track({ userId: "u", event: "e", timestamp: { seconds: -70_000_000_000n } }),
      ["timestamp"],
    );
    await rejected(
      () => src.client.track({ userId: "u", event: "e", timestamp: { seconds: 1n, nanos: -1 } }),
      ["timestamp"],
    );
    // Old but valid: historical imports are allowed.
    const old = await src.client.track({
      userId: "u",
      event: "e",
      timestamp: { seconds: 0n, nanos: 5_000_000 },
    });
    expect((await h.find(old.messageId))!.call.timestamp).toBe("1970-01-01T00:00:00.005Z");
  });

  it("Struct numbers are doubles: NaN/Infinity refused by path in a batch, finite ones stored as JSON writes them (issue 22)", async () => {
    await rejected(
      () =>
        src.client.batch({
          calls: [
            { call: { case: "track", value: { userId: "u", event: "ok" } } },
            {
              call: {
                case: "track",
                value: { userId: "u", event: "e", properties: { a: { b: [0, -Infinity] } } },
              },
            },
          ],
        }),
      ["calls[1].properties.a.b[1]"],
    );
    // A double the client passes is what is delivered: 2^60 is written as JSON.stringify writes it
    // (1152921504606847000), which parses back to 2^60.
    const r = await src.client.track({
      userId: "u",
      event: "doubles",
      properties: { big: 2 ** 60, even: 2 ** 53 + 2, tiny: 1e-7, neg: -0, f: 1.5 },
    });
    const raw = (await h.find(r.messageId))!.raw;
    expect(raw).toContain(
      '"properties":{"big":1152921504606847000,"even":9007199254740994,"tiny":1e-7,"neg":0,"f":1.5}',
    );
    expect(JSON.stringify(JSON.parse(raw))).toBe(raw);
  });

  it("objects: no NaN/Infinity, no absurd nesting", async () => {
    const e = await rejected(
      () => src.client.track({ userId: "u", event: "e", properties: { price: Number.NaN } }),
      ["properties.price"],
    );
    expect(e.message).toContain("properties.price is NaN");
    await rejected(
      () => src.client.identify({ userId: "u", traits: { x: [Number.POSITIVE_INFINITY] } }),
      ["traits.x[0]"],
    );
    const nest = (levels: number) => {
      let deep: Record<string, unknown> = { leaf: 1 };
      for (let i = 0; i < levels; i++) deep = { d: deep };
      return deep as never;
    };
    const e2 = await rejected(() => src.client.screen({ userId: "u", context: nest(40) }), ["context"]);
    expect(e2.message).toContain("nests deeper than 32 levels");
    // Deeper still, the request cannot even be decoded: still a clear INVALID_ARGUMENT.
    const e3 = await failure(src.client.screen({ userId: "u", context: nest(60) }));
    expect(e3.code).toBe(Code.INVALID_ARGUMENT);
    expect(e3.message).toContain("maximum recursion depth");
  });

  it("a call over 32 KiB is refused with a readable message", async () => {
    const before = await h.messageCount();
    const err = await failure(
      src.client.track({ userId: "u", event: "e", properties: { blob: "x".repeat(33 * 1024) } }),
    );
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.message).toMatch(/track call is \d+ bytes encoded; at most 32768 \(32 KiB\)/);
    expect(await h.messageCount()).toBe(before);
    // Just under the limit is fine.
    await src.client.track({ userId: "u", event: "e", properties: { blob: "x".repeat(32 * 1024 - 64) } });
  });

  it("batch: non-empty, fields named by index, empty oneof, per-call and total size", async () => {
    await rejected(() => src.client.batch({ calls: [] }), ["calls"]);
    const good = { call: { case: "track" as const, value: { userId: "u", event: "e" } } };
    await rejected(
      () =>
        src.client.batch({
          calls: [good, good, good, { call: { case: "track", value: { userId: "u" } } }],
        }),
      ["calls[3].event"],
    );
    await rejected(() => src.client.batch({ calls: [good, good, good, {}] }), ["calls[3]"]);
    await rejected(
      () =>
        src.client.batch({
          calls: [
            good,
            {
              call: {
                case: "track",
                value: { userId: "u", event: "e", properties: { b: "x".repeat(40_000) } },
              },
            },
          ],
        }),
      ["calls[1]"],
    );
    const blob = "x".repeat(30 * 1024);
    const many = Array.from({ length: 20 }, () => ({
      call: { case: "track" as const, value: { userId: "u", event: "e", properties: { blob } } },
    }));
    const e = await rejected(() => src.client.batch({ calls: many }), ["calls"]);
    expect(e.message).toContain("500 KiB");
  });

  it("batch is all-or-nothing and reports several problems at once", async () => {
    const err = await rejected(
      () =>
        src.client.batch({
          calls: [
            { call: { case: "track", value: { messageId: "aon-1", userId: "u", event: "ok" } } },
            { call: { case: "group", value: { userId: "u" } } },
            { call: { case: "alias", value: { userId: "u" } } },
          ],
        }),
      ["calls[1].group_id", "calls[2].previous_id"],
    );
    expect(err.message).toContain("calls[1].group_id");
    expect(await h.find("aon-1")).toBeUndefined();
  });

  it("a batch of a thousand bad calls gets a bounded, readable answer", async () => {
    const calls = Array.from({ length: 1000 }, () => ({ call: { case: "track" as const, value: {} } }));
    const err = await failure(src.client.batch({ calls }));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.fieldViolations).toHaveLength(20);
    expect(err.fieldViolations[0]!.field).toBe("calls[0].user_id");
    expect(err.message).toContain("(and 1980 more)");
  });
});
