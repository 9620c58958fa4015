import { EVENTS_STREAM } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { Load, useClusterStack } from "./cluster-stack.js";

// A 3-node cluster, R3 streams, ingest and 2 dispatchers as processes, steady gRPC Batch load.
// First nothing happens; then the node leading EVENTS is killed -9, restarted and caught up;
// then the new leader is killed too. Every acknowledged call must be delivered, and ingest must
// ride out each election instead of answering UNAVAILABLE.

const stack = useClusterStack({ dispatchers: 2 });

/** A restarted node is current again: it is a replica of EVENTS with no lag. */
async function caughtUp(node: string): Promise<void> {
  const s = stack();
  const jsm = await s.nc.jetstreamManager();
  await until(
    async () => {
      const info = await jsm.streams.info(EVENTS_STREAM);
      if (info.cluster?.leader === node) return true;
      const r = info.cluster?.replicas?.find((x) => x.name === node);
      return r?.current === true && !r.offline;
    },
    { timeout: 60_000, message: `${node} caught up on EVENTS`, interval: 250 },
  );
}

describe("Hookpost on a 3-node cluster", () => {
  it("delivers every acknowledged call under steady load with 2 dispatchers", async () => {
    const s = stack();
    const load = new Load(s.client, { tag: "steady" });
    await load.more(1500);
    await load.stop();
    await s.settled(load.acked);
    const d = s.deliveries();
    const f = load.figures();
    console.log(
      `cluster steady: ${load.acked.length} calls acked, ${d.distinct} delivered, ${d.duplicates} duplicates, ` +
        `failed ${JSON.stringify(f.failed)}, longest Batch ${f.longestMs} ms`,
    );
    expect(f.failed).toEqual({});
    expect(d.duplicates).toBe(0);
  });

  it("rides out kill -9 of the EVENTS leader, twice (with a restart in between), losing nothing", async () => {
    const s = stack();
    const requestsBefore = s.receiver.requests.length;
    const load = new Load(s.client, { tag: "kill" });
    await load.more(500);

    const report: string[] = [];
    const killLeader = async (round: number) => {
      const leader = await s.leaderOfEvents();
      const killedAt = Date.now();
      await s.cluster.kill(leader);
      const delivered = s.receiver.requests.length;
      // Calls keep being acknowledged and delivered after the leader is gone.
      await load.more(500, 90_000);
      await until(() => s.receiver.requests.length > delivered + 500, {
        timeout: 90_000,
        message: "deliveries after the kill",
      });
      const successor = await s.leaderOfEvents();
      const f = load.figures(killedAt - 1000);
      report.push(
        `round ${round}: killed ${leader} (new leader ${successor}), failed ${JSON.stringify(f.failed)}, ` +
          `unavailable window ${f.unavailableMs} ms, longest Batch ${f.longestMs} ms` +
          (f.messages.length > 0 ? `, errors: ${f.messages.join(" | ")}` : ""),
      );
      return leader;
    };

    const first = await killLeader(1);
    await s.cluster.restart(first);
    await caughtUp(first);
    await load.more(300);
    await killLeader(2);
    await load.more(300);
    await load.stop();

    await s.settled(load.acked);
    const got = s.receiver.messageIds();
    const missing = load.acked.filter((id) => !got.has(id));
    const requests = s.receiver.requests.length - requestsBefore;
    const distinctNew = new Set(
      s.receiver.requests.slice(requestsBefore).map((r) => String(r.headers["idempotency-key"])),
    ).size;
    const duplicates = requests - distinctNew;
    const f = load.figures();
    console.log(
      `cluster EVENTS leader killed: ${load.acked.length} calls acked, ${distinctNew} delivered, ` +
        `${missing.length} missing, ${duplicates} duplicates (${((100 * duplicates) / distinctNew).toFixed(2)} %), ` +
        `failed calls ${JSON.stringify(f.failed)}, longest Batch ${f.longestMs} ms\n  ${report.join("\n  ")}`,
    );
    expect(missing).toEqual([]);
    // Acks are confirmed and resent across the elections: few deliveries are made twice. The
    // delivery core of issue 24 moves a burst's overflow through a second consumer (its lane),
    // which an election can also catch: 0.8 to 2.8 % in our runs on a loaded machine (0 to 0.2 %
    // with one consumer per destination). Nothing is lost either way (above).
    expect(duplicates).toBeLessThanOrEqual(Math.ceil(distinctNew / 20));
    // The elections were ridden out: a call failed (UNAVAILABLE, not stored) only after trying for
    // the whole publish deadline, when an election on this loaded machine took longer than that.
    for (const code of Object.keys(f.failed)) expect(code).toBe("UNAVAILABLE");
    expect(load.failedEarly()).toEqual([]);
  });
});
