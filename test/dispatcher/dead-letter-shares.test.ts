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
// While DEAD has room nobody's letters are pushed out, so a share is kept only once it is 3/4
// full, and only when a trim protects someone's letters.
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

  it("keeps a lone source's letters past its share and DEAD's 3/4; once another source has letters, drops the oldest of the first to bring DEAD under 3/4", async () => {
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

    // About 2.7 KiB each: 150 letters are 12 times A's share and 4/5 of DEAD (never full).
    const aIds = await send(a, 150);
    await until(async () => (await dead()).a === 150, { message: "A's 150 dead letters" });
    // not a wait: asserts an absence (none of A's letters dropped) over a run or two of the shares
    await new Promise((r) => setTimeout(r, 2_500));
    const alone = await dead();
    expect(alone.bytes).toBeGreaterThan(0.75 * DEAD_MAX);
    expect(alone.a).toBe(150);

    // B's letters are what a trim now protects from DEAD's own oldest-first drop.
    const bIds = await send(b, 5);
    await until(async () => (await letters("dead-b")).length === 5, { message: "B's 5 dead letters" });
    const kept = await until(
      async () => {
        const d = await dead();
        return d.bytes <= 0.75 * DEAD_MAX && d.a < 150 && d.a;
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
    expect(dropped).toBeGreaterThanOrEqual(150 - kept);
  });
});
