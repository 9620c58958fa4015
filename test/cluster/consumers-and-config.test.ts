import { setTimeout as sleep } from "node:timers/promises";
import { Code, HookpostError } from "@hookpost/contract";
import { afterEach, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { until } from "../helpers/until.js";
import { Load, useClusterStack } from "./cluster-stack.js";

// A 3-node cluster, R3, ingest and 2 dispatchers as processes under steady load (cluster-stack's
// Load: 1 000 calls/s; flat out, see docs/design/delivery-at-scale.md §7). The leader of
// the destination's DELIVERIES consumer is killed -9, then the leader of the configuration
// bucket, then a node is frozen (SIGSTOP) for 10 s: deliveries and configuration changes go on,
// and no acknowledged call is lost.

const stack = useClusterStack({ dispatchers: 2 });
let second: Receiver | undefined;

afterEach(async () => {
  await second?.close();
  second = undefined;
});

/** Runs load around `disrupt`, then checks and prints what a test needs; `settleMs`: see settled(). */
async function underLoad(name: string, disrupt: (load: Load) => Promise<string>, settleMs = 120_000) {
  const s = stack();
  const before = s.receiver.requests.length;
  const load = new Load(s.client, { tag: name });
  await load.more(300);
  const what = await disrupt(load);
  await load.more(300, 90_000);
  await load.stop();
  await s.settled(load.acked, settleMs);
  const got = s.receiver.messageIds();
  const missing = load.acked.filter((id) => !got.has(id));
  const fresh = s.receiver.requests.slice(before);
  const distinct = new Set(fresh.map((r) => String(r.headers["idempotency-key"]))).size;
  const duplicates = fresh.length - distinct;
  const f = load.figures();
  console.log(
    `cluster ${name}: ${what}; ${load.acked.length} calls acked, ${distinct} delivered, ${missing.length} missing, ` +
      `${duplicates} duplicates (${((100 * duplicates) / distinct).toFixed(2)} %), failed ${JSON.stringify(f.failed)}, ` +
      `unavailable window ${f.unavailableMs} ms, longest Batch ${f.longestMs} ms` +
      (f.messages.length > 0 ? `, errors: ${f.messages.join(" | ")}` : ""),
  );
  expect(missing).toEqual([]);
  // A call answered with an error was not stored (only UNAVAILABLE is a legitimate answer).
  for (const code of Object.keys(f.failed)) expect(code).toBe("UNAVAILABLE");
  // And only after trying for the whole publish deadline (an election rode out as far as it goes).
  expect(load.failedEarly()).toEqual([]);
  return { duplicates, distinct, figures: f };
}

/** Retries an admin change while the bucket elects a leader (UNAVAILABLE means: not changed). */
async function change<T>(what: string, fn: () => Promise<T>): Promise<T> {
  let result: T | undefined;
  await until(
    async () => {
      try {
        result = await fn();
        return true;
      } catch (err) {
        if (err instanceof HookpostError && err.code === Code.UNAVAILABLE) return false;
        throw err;
      }
    },
    { timeout: 60_000, message: what, interval: 250 },
  );
  return result!;
}

describe("Hookpost on a 3-node cluster: consumer and bucket leaders", () => {
  it("keeps delivering when the leader of the destination's consumer is killed -9", async () => {
    const s = stack();
    const { duplicates } = await underLoad("DELIVERIES consumer leader killed", async () => {
      const leader = await s.leaderOfDeliveries();
      const delivered = s.receiver.requests.length;
      await s.cluster.kill(leader);
      await until(() => s.receiver.requests.length > delivered + 300, {
        timeout: 90_000,
        message: "deliveries after the kill",
      });
      const successor = await s.leaderOfDeliveries();
      await s.cluster.restart(leader);
      return `killed ${leader}, new consumer leader ${successor}, ${leader} restarted`;
    });
    // An ack is confirmed only by a leader's answer, not by the "503 no responders" of an election
    // (confirmed-ack.ts), acks the dead leader confirmed but never stored are sent again to its
    // successor (core AckReplay), and a call that comes back is never delivered directly again
    // (router.ts). Before these, runs saw 10 to 118 duplicates (0.1 to 3.6 %); after, 0 in most.
    // What may still come twice: deliveries under way during the election whose ack-wait (5 s
    // here) ends before their resent ack lands, 2 replicas x 16 (DELIVERY_CONCURRENCY), and a few
    // acks a dispatcher could not replay (it was reconnecting when the new leader was announced).
    // A redelivery storm would be hundreds.
    expect(duplicates).toBeLessThanOrEqual(48);
  });

  it("applies configuration changes after the configuration bucket's leader is killed -9", async () => {
    const s = stack();
    const hook = await Receiver.http();
    second = hook;
    await underLoad("config bucket leader killed", async () => {
      const leader = await s.leaderOfConfig();
      await s.cluster.kill(leader);
      // A new destination, made after the kill, must be picked up by the dispatchers.
      const dest = await change("a destination created after the kill", () =>
        s.admin.createDestination({
          destination: { name: "second", urls: [hook.url()], enabled: true, sourceIds: [s.sourceId] },
        }),
      );
      const t = Date.now();
      await until(() => hook.requests.length > 0, {
        timeout: 90_000,
        message: "deliveries to the new destination",
      });
      const successor = await s.leaderOfConfig();
      await s.cluster.restart(leader);
      return `killed ${leader}, new bucket leader ${successor}, destination ${dest.destination!.id} delivering after ${Date.now() - t} ms`;
    });
    // And changes keep reaching the dispatchers: disabling the new destination stops its deliveries.
    const dests = await s.admin.listDestinations({});
    const id = dests.destinations.find((d) => d.name === "second")!.id;
    const disabled = await change("disable the new destination", () =>
      s.admin.updateDestination({ destination: { id, enabled: false }, updateMask: { paths: ["enabled"] } }),
    );
    // Both dispatchers applied it (their /readyz revision): calls sent from now on skip that destination.
    await waitForRevision(disabled.revision, s.dispatcherOps, 60_000);
    const load = new Load(s.client, { tag: "after-disable" });
    await load.more(200);
    await load.stop();
    await s.settled(load.acked);
    const atSecond = hook.messageIds();
    expect(load.acked.filter((m) => atSecond.has(m))).toEqual([]);
  });

  it("loses nothing when a node is frozen for 10 s (SIGSTOP, then SIGCONT)", async () => {
    const s = stack();
    const { duplicates, distinct } = await underLoad(
      "node frozen 10 s",
      async () => {
        const leader = await s.leaderOfEvents();
        s.cluster.freeze(leader);
        const frozenAt = Date.now();
        await sleep(10_000); // not a wait: the scenario itself, a 10 s partition under load
        s.cluster.thaw(leader);
        await s.cluster.ready();
        return `froze ${leader} (the EVENTS leader) for ${Date.now() - frozenAt} ms`;
      },
      // After a freeze nats-server 2.9.10 was seen to leave DELIVERIES without a leader for over a
      // minute (503): nothing moves meanwhile, and nothing may be lost after.
      240_000,
    );
    // At least once: deliveries whose acks were in flight to a frozen consumer leader, or not yet
    // replicated when a new one took over, come again (runs saw 0.1 % to 5.8 %). When the server
    // also lost count of a lane, the lane's consumer is created again (stranded.ts) and hands
    // out what the lane still stores, some of it delivered already whose removal the server
    // lost: runs with that saw 4.4 % and 8.3 %. A redelivery storm (every delivery again) would
    // still be far above this bound.
    expect(duplicates).toBeLessThanOrEqual(Math.max(32, Math.ceil(distinct * 0.15)));
  });
});
