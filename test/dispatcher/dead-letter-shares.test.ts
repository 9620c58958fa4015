import { DEAD_STREAM, DEFAULT_TOPOLOGY, deadSubject } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

const KIB = 1024;
const SHARE = 32 * KIB;
const DEAD_MAX = 512 * KIB;
const BLOB = "x".repeat(2 * KIB);

// DEAD is shared by every source and drops its oldest letters when full: without a share per
// source, one source whose endpoints refuse everything would push out the others' dead letters.
// While DEAD has room nobody's letters are pushed out, so a share is kept only once it is 3/4 full.
describe("each source's share of DEAD (SOURCE_MAX_DEAD_LETTER_BYTES)", () => {
  let s: Stack;

  beforeAll(async () => {
    const topology = { ...DEFAULT_TOPOLOGY, deadLetterMaxBytes: DEAD_MAX };
    s = await Stack.start({
      ingest: { topology },
      dispatcher: { topology, deadLetterSourceMaxBytes: SHARE, opsAddr: "127.0.0.1:0" },
    });
  });

  afterAll(async () => {
    await s?.close();
  });

  const letters = async (destinationId: string) =>
    (await s.admin.listDeadLetters({ destinationId, pageSize: 1000 })).deadLetters.map((l) => l.messageId);
  const dead = async () => {
    const jsm = await s.nc.jetstreamManager();
    const { state } = await jsm.streams.info(DEAD_STREAM, { subjects_filter: deadSubject("dead-a") });
    return {
      bytes: state.bytes,
      a: state.subjects?.[deadSubject("dead-a")] ?? 0,
      average: state.bytes / state.messages,
    };
  };

  it("keeps a source's letters past its share while DEAD has room, then drops its oldest to keep DEAD under 3/4, none of another source's", async () => {
    const a = await s.source("A");
    const b = await s.source("B");
    await s.destination({ id: "dead-a", sourceIds: [a.id], urls: [s.receiver.url("/a")] });
    await s.destination({ id: "dead-b", sourceIds: [b.id], urls: [s.receiver.url("/b")] });
    // 400 is not retried: every call becomes a dead letter at once.
    s.receiver.respond = () => ({ status: 400, body: "refused" });
    const send = async (c: typeof a, n: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++)
        ids.push((await c.client.track({ userId: "u", event: "E", properties: { blob: BLOB } })).messageId);
      return ids;
    };

    const bIds = await send(b, 5);
    await until(async () => (await letters("dead-b")).length === 5, { message: "B's 5 dead letters" });
    // About 2.7 KiB each: 80 of A's are 6 times its share, and DEAD is under 3/4 full.
    const aIds = await send(a, 80);
    await until(async () => (await dead()).a === 80, { message: "A's 80 dead letters" });
    // not a wait: asserts an absence (none of A's letters dropped) over a run or two of the shares
    await new Promise((r) => setTimeout(r, 2_500));
    const roomy = await dead();
    expect(roomy.a * roomy.average).toBeGreaterThan(4 * SHARE);
    expect(roomy.bytes).toBeLessThan(0.75 * DEAD_MAX);
    expect(roomy.a).toBe(80);

    // 90 more take DEAD past 3/4 (never full: no letter of B's is pushed out by DEAD itself).
    aIds.push(...(await send(a, 90)));
    await until(() => s.receiver.requests.filter((r) => r.url === "/a").length >= 170, {
      message: "A's 170 calls refused by its endpoint",
    });
    const kept = await until(
      async () => {
        const d = await dead();
        return d.bytes <= 0.75 * DEAD_MAX && d.a < 170 && d.a;
      },
      { timeout: 30_000, message: "DEAD back under 3/4, from A's letters" },
    );
    const aLetters = await letters("dead-a");
    // Only as many as needed went, the oldest: A keeps far more than its share.
    expect(kept * (await dead()).average).toBeGreaterThan(4 * SHARE);
    expect(aLetters).toContain(aIds.at(-1));
    expect(aLetters).not.toContain(aIds[0]);
    expect((await letters("dead-b")).sort()).toEqual([...bIds].sort());

    const metrics = await (await fetch(`http://127.0.0.1:${s.dispatchers[0]!.opsPort}/metrics`)).text();
    const dropped = Number(/^hookpost_dispatcher_dead_letters_dropped_total (\d+)/m.exec(metrics)?.[1]);
    expect(dropped).toBeGreaterThanOrEqual(170 - kept);
  });
});
