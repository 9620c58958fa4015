import { DeliveryMode, DeliveryState, DestinationState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import { afterAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// Paused destinations keep their calls: the router still fans out to them, their consumer
// simply is not pulled, and what waits longer than the retry window becomes a dead letter.

const stacks: Stack[] = [];

afterAll(async () => {
  await Promise.all(stacks.map((s) => s.close()));
});

async function start(options: Parameters<typeof Stack.start>[0] = {}): Promise<Stack> {
  const s = await Stack.start({ ...options, dispatcher: { opsAddr: "127.0.0.1:0", ...options.dispatcher } });
  stacks.push(s);
  return s;
}

/** The dispatcher's own view: how many destinations it counts as enabled (from /readyz). */
async function enabledSeenByDispatcher(s: Stack): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${s.dispatchers[0]!.opsPort}/readyz`);
  return ((await res.json()) as { enabled: number }).enabled;
}

const health = async (s: Stack, id: string) =>
  (await s.admin.listDestinationHealth({ destinationId: id })).destinations[0]!;

describe("a paused destination", () => {
  it("keeps 100 calls sent while disabled and delivers each exactly once after enable", async () => {
    const s = await start();
    const src = await s.source("pause");
    await s.destination({ id: "paused", sourceIds: [src.id] });
    await until(async () => (await enabledSeenByDispatcher(s)) === 1);
    await s.admin.updateDestination({
      destination: { id: "paused", enabled: false },
      updateMask: { paths: ["enabled"] },
    });
    // Fact, not a sleep: the dispatcher has applied the pause.
    await until(async () => (await enabledSeenByDispatcher(s)) === 0);

    const sent = new Set<string>();
    for (let i = 0; i < 100; i++)
      sent.add((await src.client.track({ userId: `u-${i}`, event: "Held" })).messageId);
    await until(async () => (await health(s, "paused")).backlog === 100n, {
      timeout: 20_000,
      message: "a backlog of 100",
    });
    const h = await health(s, "paused");
    expect(h.state).toBe(DestinationState.PAUSED);
    expect(h.oldestWaitingTime).toBeDefined();
    expect(s.receiver.requests).toHaveLength(0);
    const one = await s.admin.getMessage({ messageId: [...sent][0]! });
    expect(one.deliveries).toEqual([
      expect.objectContaining({ destinationId: "paused", state: DeliveryState.PENDING }),
    ]);

    await s.admin.updateDestination({
      destination: { id: "paused", enabled: true },
      updateMask: { paths: ["enabled"] },
    });
    await s.receiver.waitFor(100, 30_000);
    // Everything acknowledged: nothing is left that could arrive a second time.
    await until(async () => (await health(s, "paused")).backlog === 0n, {
      timeout: 20_000,
      message: "the backlog to drain",
    });
    expect(s.receiver.requests).toHaveLength(100);
    expect(s.receiver.messageIds()).toEqual(sent);
    expect((await s.admin.listDeadLetters({ destinationId: "paused" })).deadLetters).toEqual([]);
  });

  it("dead-letters calls that wait past the retry window, never dropping them", async () => {
    const topology = { ...DEFAULT_TOPOLOGY, retryWindowMs: 2000, retryMaxDelayMs: 500 };
    const s = await start({ ingest: { topology }, dispatcher: { topology } });
    const src = await s.source("expire");
    await s.destination({ id: "asleep", sourceIds: [src.id], enabled: false });
    const sent: string[] = [];
    for (let i = 0; i < 5; i++) sent.push((await src.client.track({ userId: "u", event: "Late" })).messageId);
    let letters: Awaited<ReturnType<typeof s.admin.listDeadLetters>>["deadLetters"] = [];
    await until(
      async () => {
        letters = (await s.admin.listDeadLetters({ destinationId: "asleep" })).deadLetters;
        return letters.length === 5;
      },
      { timeout: 30_000, message: "5 dead letters" },
    );
    expect(letters.map((l) => l.messageId).sort()).toEqual([...sent].sort());
    for (const l of letters) {
      expect(l).toMatchObject({ attempts: 0, reason: "destination disabled for the whole retry window" });
    }
    // A call leaves the backlog when its dead letter is written and it is acknowledged, which the
    // listing can see in between.
    await until(async () => (await health(s, "asleep")).backlog === 0n, { message: "no backlog left" });
    await until(async () => {
      const m = await s.admin.getMessage({ messageId: sent[0]! });
      return m.deliveries[0]?.state === DeliveryState.DEAD_LETTER;
    });
    expect(s.receiver.requests).toHaveLength(0);
  });
  it("dead-letters a paused FAN_OUT destination's calls per URL at the retry window, never leaving them to max-age", async () => {
    // Each URL of a FAN_OUT destination is a delivery target with its own lane (`<id>~<i>`): the
    // janitor looked only at the destination's own lane, so a paused fan-out destination's calls
    // waited past the window until the stream's max-age removed them without a record.
    const topology = { ...DEFAULT_TOPOLOGY, retryWindowMs: 2000, retryMaxDelayMs: 500 };
    const s = await start({ ingest: { topology }, dispatcher: { topology } });
    const src = await s.source("expire-fan");
    await s.destination({
      id: "asleep-fan",
      sourceIds: [src.id],
      urls: [s.receiver.url("/a"), s.receiver.url("/b")],
      deliveryMode: DeliveryMode.FAN_OUT,
      enabled: false,
    });
    const sent: string[] = [];
    for (let i = 0; i < 3; i++) sent.push((await src.client.track({ userId: "u", event: "Late" })).messageId);
    let letters: Awaited<ReturnType<typeof s.admin.listDeadLetters>>["deadLetters"] = [];
    await until(
      async () => {
        letters = (await s.admin.listDeadLetters({ destinationId: "asleep-fan" })).deadLetters;
        return letters.length === 6;
      },
      { timeout: 30_000, message: "6 dead letters (3 calls x 2 URLs)" },
    );
    for (const urlIndex of [0, 1]) {
      const mine = letters.filter((l) => l.urlIndex === urlIndex);
      expect(mine.map((l) => l.messageId).sort()).toEqual([...sent].sort());
    }
    for (const l of letters) {
      expect(l).toMatchObject({ attempts: 0, reason: "destination disabled for the whole retry window" });
    }
    await until(async () => (await health(s, "asleep-fan")).backlog === 0n, { message: "no backlog left" });
    expect(s.receiver.requests).toHaveLength(0);
  });
});
