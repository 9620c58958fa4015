import { DEAD_STREAM, deadSubject } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

const KIB = 1024;
const SHARE = 32 * KIB;
const BLOB = "x".repeat(2 * KIB);

// DEAD is shared by every source and drops its oldest letters when full: without a share per
// source, one source whose endpoints refuse everything would push out the others' dead letters.
describe("each source's share of DEAD (SOURCE_MAX_DEAD_LETTER_BYTES)", () => {
  let s: Stack;

  beforeAll(async () => {
    s = await Stack.start({ dispatcher: { deadLetterSourceMaxBytes: SHARE, opsAddr: "127.0.0.1:0" } });
  });

  afterAll(async () => {
    await s?.close();
  });

  const letters = async (destinationId: string) =>
    (await s.admin.listDeadLetters({ destinationId, pageSize: 1000 })).deadLetters.map((l) => l.messageId);

  it("drops the oldest dead letters of a source over its share, and none of another source's", async () => {
    const a = await s.source("A");
    const b = await s.source("B");
    await s.destination({ id: "dead-a", sourceIds: [a.id], urls: [s.receiver.url("/a")] });
    await s.destination({ id: "dead-b", sourceIds: [b.id], urls: [s.receiver.url("/b")] });
    // 400 is not retried: every call becomes a dead letter at once.
    s.receiver.respond = () => ({ status: 400, body: "refused" });

    const bIds: string[] = [];
    for (let i = 0; i < 5; i++)
      bIds.push((await b.client.track({ userId: "u", event: "E", properties: { blob: BLOB } })).messageId);
    await until(async () => (await letters("dead-b")).length === 5, { message: "B's 5 dead letters" });
    const aIds: string[] = [];
    for (let i = 0; i < 60; i++)
      aIds.push((await a.client.track({ userId: "u", event: "E", properties: { blob: BLOB } })).messageId);
    await until(() => s.receiver.requests.filter((r) => r.url === "/a").length >= 60, {
      message: "A's 60 calls refused by its endpoint",
    });

    const jsm = await s.nc.jetstreamManager();
    const within = async () => {
      const { state } = await jsm.streams.info(DEAD_STREAM, { subjects_filter: deadSubject("dead-a") });
      const count = state.subjects?.[deadSubject("dead-a")] ?? 0;
      // Each source is measured at DEAD's average letter, as the dispatcher does.
      return count > 0 && count * (state.bytes / state.messages) <= SHARE && count;
    };
    const kept = await until(within, { timeout: 30_000, message: "A's dead letters within its share" });
    expect(kept).toBeLessThan(60);
    const aLetters = await letters("dead-a");
    // The newest stay, the oldest went.
    expect(aLetters).toContain(aIds.at(-1));
    expect(aLetters).not.toContain(aIds[0]);
    expect((await letters("dead-b")).sort()).toEqual([...bIds].sort());

    const metrics = await (await fetch(`http://127.0.0.1:${s.dispatchers[0]!.opsPort}/metrics`)).text();
    const dropped = Number(/^hookpost_dispatcher_dead_letters_dropped_total (\d+)/m.exec(metrics)?.[1]);
    expect(dropped).toBeGreaterThanOrEqual(60 - kept);
  });
});
