import { DEAD_STREAM, DEFAULT_TOPOLOGY, deadSubject } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

const KIB = 1024;
const SHARE = 32 * KIB;
// 66 letters of about 2.7 KiB: past 3/4 of DEAD (shares are kept from there on), never full.
const DEAD_MAX = 224 * KIB;
const BLOB = "x".repeat(2 * KIB);

// dead-letter-shares.ts charges a destination shared by sources to each of them, then has every
// destination of a source over its share shed the same fraction. So when source A floods a
// destination it shares with B, B counts as over its share too, and B's own destination (which
// only B sends to, far within the share) loses its dead letters: what the share was to prevent.
describe("SOURCE_MAX_DEAD_LETTER_BYTES and a destination shared by two sources", () => {
  let s: Stack;

  beforeAll(async () => {
    const topology = { ...DEFAULT_TOPOLOGY, deadLetterMaxBytes: DEAD_MAX };
    s = await Stack.start({
      ingest: { topology },
      dispatcher: { topology, deadLetterSourceMaxBytes: SHARE },
    });
  });

  afterAll(async () => {
    await s?.close();
  });

  const letters = async (destinationId: string) =>
    (await s.admin.listDeadLetters({ destinationId, pageSize: 1000 })).deadLetters.map((l) => l.messageId);

  it("another source flooding the shared destination never drops B's letters on B's own destination", async () => {
    const a = await s.source("A");
    const b = await s.source("B");
    await s.destination({ id: "shared", sourceIds: [a.id, b.id], urls: [s.receiver.url("/shared")] });
    await s.destination({ id: "own-b", sourceIds: [b.id], urls: [s.receiver.url("/own-b")] });
    s.receiver.respond = () => ({ status: 400, body: "refused" });

    const bIds: string[] = [];
    for (let i = 0; i < 3; i++)
      bIds.push((await b.client.track({ userId: "u", event: "E", properties: { blob: BLOB } })).messageId);
    await until(async () => (await letters("own-b")).length === 3, { message: "B's 3 dead letters" });
    for (let i = 0; i < 60; i++)
      await a.client.track({ userId: "u", event: "E", properties: { blob: BLOB } });
    await until(() => s.receiver.requests.filter((r) => r.url === "/shared").length >= 63, {
      message: "the shared destination's calls refused",
    });

    const jsm = await s.nc.jetstreamManager();
    // Wait for the trim of the shared destination (A is over its share through it).
    await until(
      async () => {
        const { state } = await jsm.streams.info(DEAD_STREAM, { subjects_filter: deadSubject("shared") });
        const n = state.subjects?.[deadSubject("shared")] ?? 0;
        return n > 0 && n < 63;
      },
      { timeout: 30_000, message: "the shared destination trimmed" },
    );
    // not a wait: asserts an absence (B's letters still there) over another run or two of the shares
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await letters("own-b")).sort(), "B's own letters, 3 x 2 KiB, far within B's share").toEqual(
      [...bIds].sort(),
    );
  });
});
