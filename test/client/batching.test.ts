import { setTimeout as sleep } from "node:timers/promises";
import { Analytics, type AnalyticsError, type AnalyticsOptions, LIBRARY } from "@hookpost/client";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { FakeIngest, useFakeIngest } from "./fake-ingest.js";

const clients: Analytics[] = [];
const errors: AnalyticsError[] = [];
const ingest = useFakeIngest({
  clients,
  afterClose: () => expect(errors.splice(0).map((e) => e.message)).toEqual([]),
});

function client(options: AnalyticsOptions = {}): Analytics {
  const c = new Analytics(ingest.writeKey, { endpoint: ingest.target, ...options });
  c.on("error", (err) => errors.push(err));
  clients.push(c);
  return c;
}

describe("batching", () => {
  it("sends a batch per flushAt calls and the rest on close()", async () => {
    const a = client({ flushAt: 20, flushAfter: 60_000 });
    const ids = Array.from({ length: 45 }, (_, i) => a.track({ userId: `u${i}`, event: "Clicked" }));
    await until(() => ingest.storedNow.length >= 40, { message: "40 calls" });
    await sleep(300); // not a wait: no third batch goes out meanwhile (the assertion)
    expect(ingest.storedNow).toHaveLength(40);
    expect(ingest.batches.map((b) => b.messageIds.length)).toEqual([20, 20]);
    expect(a.queued).toBe(5);

    await a.close();
    const stored = await ingest.stored();
    expect(stored).toHaveLength(45);
    expect(stored.map((s) => s.messageId)).toEqual(ids);
    expect(ingest.batches.map((b) => b.messageIds.length)).toEqual([20, 20, 5]);
  });

  it("sends what is queued once flushAfter passed, with no further calls", async () => {
    const a = client({ flushAt: 100, flushAfter: 400 });
    const started = Date.now();
    for (let i = 0; i < 3; i++) a.identify({ userId: `u${i}`, traits: { n: i } });
    await sleep(50); // not a wait: nothing is sent before flushAfter (the assertion)
    expect(ingest.storedNow).toHaveLength(0);
    await until(() => ingest.storedNow.length === 3, { message: "3 calls after flushAfter" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    expect(ingest.batches).toHaveLength(1);
  });

  it("sends every call at once with flushAt 1 (and size is the same setting)", async () => {
    const a = client({ flushAfter: 60_000 });
    a.size = 1;
    expect(a.flushAt).toBe(1);
    for (let i = 0; i < 3; i++) {
      a.page({ anonymousId: `anon${i}`, name: "Home" });
      await until(() => ingest.storedNow.length === i + 1, { timeout: 2000, message: `call ${i + 1}` });
    }
    expect(ingest.batches.map((b) => b.messageIds.length)).toEqual([1, 1, 1]);
  });

  it("lowering flushAt sends the queued calls, and flush() resolves once they are stored", async () => {
    const a = client({ flushAt: 50, flushAfter: 60_000 });
    for (let i = 0; i < 5; i++) a.screen({ userId: "u", name: `S${i}` });
    await sleep(100); // not a wait: nothing is sent below flushAt (the assertion)
    expect(ingest.storedNow).toHaveLength(0);
    a.flushAt = 5;
    await until(() => ingest.storedNow.length === 5, { message: "5 calls" });
    a.alias({ userId: "u", previousId: "anon" });
    await a.flush();
    expect(ingest.storedNow).toHaveLength(6);
    await a.flush(); // nothing queued: resolves at once
  });

  it("splits a 3000-call burst into batches under 500 KiB, each call stored once", async () => {
    const a = client({ flushAt: 5000, maxQueueSize: 5000, flushAfter: 60_000 });
    const blob = "x".repeat(1024);
    const ids = new Set<string>();
    for (let i = 0; i < 3000; i++)
      ids.add(a.track({ userId: `u${i}`, event: "Bulk", properties: { i, blob } }));
    await a.flush();
    const stored = await ingest.stored();
    expect(stored).toHaveLength(3000);
    expect(new Set(stored.map((s) => s.messageId))).toEqual(ids);
    const received = ingest.batches.flatMap((b) => b.messageIds);
    expect(received).toHaveLength(3000); // no call sent twice
    expect(ingest.batches.length).toBeGreaterThanOrEqual(6);
    for (const b of ingest.batches) expect(b.bytes).toBeLessThan(500 * 1024);
    // Batches are filled, not just cut: all but the remainder (any arrival order) are near the limit.
    expect(ingest.batches.filter((b) => b.bytes < 480 * 1024).length).toBeLessThanOrEqual(1);
  });

  it("keeps at most maxInFlight batches in flight", async () => {
    ingest.delayMs = 100;
    const a = client({ flushAt: 1, maxInFlight: 2 });
    for (let i = 0; i < 10; i++) a.track({ userId: "u", event: `E${i}` });
    await a.flush();
    expect(ingest.storedNow).toHaveLength(10);
    expect(ingest.maxConcurrent).toBe(2);
  });

  it("follows a change of endpoint", async () => {
    const other = await FakeIngest.start();
    try {
      const a = client({ flushAt: 1 });
      a.track({ userId: "u", event: "First" });
      await a.flush();
      a.endpoint = other.target;
      a.track({ userId: "u", event: "Second" });
      await a.flush();
      expect(ingest.storedNow.map((s) => (s.value as { event: string }).event)).toEqual(["First"]);
      expect(other.storedNow.map((s) => (s.value as { event: string }).event)).toEqual(["Second"]);
    } finally {
      await other.close();
    }
  });
});

describe("what is sent", () => {
  it("maps every call type's fields, stamps ids and timestamps, and adds context.library", async () => {
    const a = client({ flushAt: 100, flushAfter: 60_000 });
    const historical = new Date("2024-05-01T10:00:00.000Z");
    const before = Date.now();
    const ids = [
      a.identify({ userId: "u1", traits: { email: "a@example.com" }, context: { ip: "10.0.0.1" } }),
      a.track({
        anonymousId: "anon1",
        event: "Bought",
        properties: { price: 9.5, when: historical, tags: ["a", undefined] },
        integrations: { All: false, Webhooks: true },
        timestamp: historical,
      }),
      a.page({ userId: "u1", name: "Pricing", category: "Docs", properties: { url: "https://x.test/p" } }),
      a.screen({ userId: "u1", name: "Main", timestamp: "2024-05-01T10:00:00Z" }),
      a.group({ userId: "u1", groupId: "g1", traits: { plan: "pro" } }),
      a.alias({ userId: "u1", previousId: "anon1", messageId: "my-own-id" }),
    ];
    await a.flush();
    const stored = await ingest.stored();
    expect(stored.map((s) => s.type)).toEqual(["identify", "track", "page", "screen", "group", "alias"]);
    expect(stored.map((s) => s.messageId)).toEqual(ids);
    expect(ids[5]).toBe("my-own-id");
    for (const id of ids.slice(0, 5))
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    const [identify, track, page, screen, group, alias] = stored.map(
      (s) => s.value as unknown as Record<string, unknown>,
    );
    const library = { name: "hookpost", version: LIBRARY.version };
    expect(LIBRARY.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(identify).toMatchObject({
      userId: "u1",
      traits: { email: "a@example.com" },
      context: { ip: "10.0.0.1", library },
    });
    expect(track).toMatchObject({
      anonymousId: "anon1",
      event: "Bought",
      properties: { price: 9.5, when: historical.toISOString(), tags: ["a", null] },
      integrations: { All: false, Webhooks: true },
      context: { library },
    });
    expect(seconds(track!.timestamp)).toBe(historical.getTime() / 1000);
    expect(seconds(screen!.timestamp)).toBe(historical.getTime() / 1000);
    // Without a timestamp, the time of the call (not of the send) is stamped.
    expect(seconds(identify!.timestamp) * 1000).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(page).toMatchObject({
      name: "Pricing",
      category: "Docs",
      properties: { url: "https://x.test/p" },
    });
    expect(screen).toMatchObject({ name: "Main" });
    expect(group).toMatchObject({ groupId: "g1", traits: { plan: "pro" } });
    expect(alias).toMatchObject({ userId: "u1", previousId: "anon1" });
  });
});

function seconds(ts: unknown): number {
  return Number((ts as { seconds: bigint }).seconds);
}
