import { ORDERED_STREAM } from "@hookpost/core";
import type { RunningDispatcher } from "@hookpost/dispatcher";
import type { Subscription } from "nats";
import { afterEach, describe, expect, it } from "vitest";
import type { Receiver } from "../helpers/receiver.js";
import { until } from "../helpers/until.js";
import {
  destination,
  eventsRouted,
  type Pipeline,
  pipeline,
  pipelineWithDispatcherPerTest,
  publishCall,
  track,
} from "./helpers.js";

/**
 * Direct delivery (docs/design/delivery-at-scale.md §6): the router makes the first attempt
 * itself for a destination that answers fast, and stores nothing on DELIVERIES for it; what the
 * attempt ends in (a retry, a dead letter) is the partitions' own handling; a slow destination,
 * or DIRECT_DELIVERY off, stores every delivery first.
 */

const t = pipelineWithDispatcherPerTest();
const subs: Subscription[] = [];

/** What the router and parking store on DELIVERIES, by subject, as a plain subscriber sees it. */
function storedSubjects(): string[] {
  const seen: string[] = [];
  for (const subject of ["hookpost.deliveries.>", "hookpost.lanes.>"]) {
    subs.push(t.p.nc.subscribe(subject, { callback: (_err, m) => seen.push(m.subject) }));
  }
  return seen;
}

async function directCount(outcome: "done" | "handed_back"): Promise<number> {
  const values = (await t.d!.metrics.direct.get()).values;
  return values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

/** Sends one call of `sourceId` and waits until `rx` got `total` requests. */
async function sendAndWait(sourceId: string, rx: Receiver, total: number): Promise<string> {
  const call = track({ sourceId });
  await publishCall(t.p.js, call);
  await rx.waitFor(total, 20_000);
  return call.messageId;
}

/**
 * A dispatcher (with `overrides`), and destination `id` of source `id` with one call delivered
 * through a partition: this replica then knows how it answers. `respond`: set before that call.
 * `fast`: then calls one at a time until one went direct. The first answer alone decides whether
 * the destination answers fast (its latency is an average that starts there), and a loaded machine
 * stalling that one request past the bound would have the test's calls stored; once a call went
 * direct, one slow answer weighs a quarter. The test reads `rx.requests` from `warm` on.
 */
async function answered(
  id: string,
  overrides: Parameters<Pipeline["dispatcher"]>[0] = {},
  respond?: Receiver["respond"],
  fast = true,
): Promise<Receiver> {
  t.d = await t.p.dispatcher(overrides);
  const rx = await t.receiver();
  if (respond) rx.respond = respond;
  await t.p.putDestination(destination({ id, sourceIds: [id], urls: [rx.url(`/${id}`)] }));
  // Each call routed (EVENTS is a work queue: it leaves once the router is done with it, direct
  // attempt counted) before the next one.
  const send = async () => {
    await sendAndWait(id, rx, rx.requests.length + 1);
    await eventsRouted(t.p.jsm, id);
  };
  await send();
  if (fast)
    await until(
      async () => {
        if ((await directCount("done")) > 0) return true;
        await send();
        return false;
      },
      { timeout: 30_000, message: `a call of ${id} attempted directly` },
    );
  return rx;
}

afterEach(async () => {
  for (const s of subs.splice(0)) s.unsubscribe();
});

describe("direct delivery", () => {
  it("a destination that answers fast gets its calls from the router itself, nothing stored, each once", async () => {
    // Not known to answer yet: its first call goes through a partition.
    const rx = await answered("direct-fast");
    const [warm, before] = [rx.requests.length, await directCount("done")];
    const stored = storedSubjects();
    await t.p.nc.flush();
    const sent: string[] = [];
    for (let i = 0; i < 20; i++) sent.push(await sendAndWait("direct-fast", rx, warm + i + 1));
    await t.p.nc.flush();
    expect(stored).toEqual([]);
    // The counter moves once the router has handled the answer, which can follow its receipt.
    await until(async () => (await directCount("done")) >= before + 20, {
      message: "20 direct attempts done",
    });
    expect(await directCount("done")).toBe(before + 20);
    const keys = rx.requests.slice(warm).map((r) => String(r.headers["idempotency-key"]));
    expect(keys).toEqual(sent);
  });

  it("a burst beyond the router's direct attempts waits its turn on EVENTS rather than being stored", async () => {
    // ROUTER_CONCURRENCY 8: 4 direct attempts at once, 4 more calls being routed meanwhile.
    const rx = await answered("direct-burst", { routerConcurrency: 8 });
    const [warm, before] = [rx.requests.length, await directCount("done")];
    const stored = storedSubjects();
    await t.p.nc.flush();
    const burst = Array.from({ length: 60 }, () => track({ sourceId: "direct-burst" }));
    await Promise.all(burst.map((call) => publishCall(t.p.js, call)));
    await rx.waitFor(warm + 60, 20_000);
    await t.p.nc.flush();
    // Storing each call that found no direct attempt free stored 25-26 of these 60. A turn comes
    // within 50 ms while attempts move; a machine stalled longer than that may store a few.
    expect(stored.length).toBeLessThanOrEqual(10);
    await until(async () => (await directCount("done")) >= before + 60 - stored.length, {
      message: "every direct attempt done",
    });
    expect(await directCount("done")).toBe(before + 60 - stored.length);
    const received = rx.requests.slice(warm).map((r) => r.headers["idempotency-key"]);
    expect(new Set(received).size).toBe(60);
  });

  it("a call routed again after a failed fan-out is not sent directly to a destination its first routing stored", async () => {
    // redo-a is served by partitions first (not known yet), redo-b is PER_USER and ORDERED refuses
    // every write: the fan-out fails and the call comes back from EVENTS until ORDERED takes it.
    t.d = await t.p.dispatcher();
    const [rxA, rxB] = [await t.receiver(), await t.receiver()];
    await t.p.putDestination(
      destination({ id: "redo-a", sourceIds: ["redo", "redo-warm"], urls: [rxA.url("/redo-a")] }),
    );
    await t.p.putDestination(
      destination({ id: "redo-b", sourceIds: ["redo"], urls: [rxB.url("/redo-b")], ordering: "PER_USER" }),
    );
    const ordered = (await t.p.jsm.streams.info(ORDERED_STREAM)).config;
    await t.p.jsm.streams.update(ORDERED_STREAM, { ...ordered, max_bytes: 1 });
    const call = track({ sourceId: "redo" });
    const copies = (r: Receiver) =>
      r.requests.filter((q) => q.headers["idempotency-key"] === call.messageId).length;
    try {
      await publishCall(t.p.js, call);
      await until(() => copies(rxA) === 1, { message: "redo-a's stored delivery delivered" });
      // redo-a now answers fast: other calls go to it directly, while the call still comes back.
      await until(
        async () => {
          if ((await directCount("done")) > 0) return true;
          await sendAndWait("redo-warm", rxA, rxA.requests.length + 1);
          return false;
        },
        { timeout: 30_000, message: "a call of redo-warm attempted directly" },
      );
    } finally {
      await t.p.jsm.streams.update(ORDERED_STREAM, ordered);
    }
    await until(() => copies(rxB) === 1, { message: "redo-b delivered once ORDERED takes it" });
    await eventsRouted(t.p.jsm, "redo");
    // Routed again, redo-a's delivery was stored again with its first id (deduplicated), not
    // attempted directly: a direct attempt has no stored copy to be deduplicated against.
    expect(copies(rxA)).toBe(1);
  });

  it("a direct attempt that fails is parked on the destination's lane and delivered by its retry", async () => {
    const rx = await answered("direct-flaky");
    const [warm, before] = [rx.requests.length, await directCount("done")];
    const failOnce = new Set<string>();
    rx.respond = (r) => {
      const key = String(r.headers["idempotency-key"]);
      if (failOnce.has(key)) return { status: 200 };
      failOnce.add(key);
      return { status: 503 };
    };
    const stored = storedSubjects();
    await t.p.nc.flush();
    const id = await sendAndWait("direct-flaky", rx, warm + 2);
    const tries = rx.requests.filter((r) => r.headers["idempotency-key"] === id);
    expect(tries.map((r) => r.body)).toEqual([tries[0]!.body, tries[0]!.body]);
    // Stored once: on its lane, for the retry; never on a partition.
    expect(stored).toEqual(["hookpost.lanes.direct-flaky"]);
    expect(await directCount("done")).toBe(before + 1);
    expect((await t.d!.metrics.retries.get()).values[0]?.value).toBe(1);
  });

  it("a direct attempt answered 400 is dead-lettered at once with the exact body sent", async () => {
    const rx = await answered("direct-400");
    const [warm, before] = [rx.requests.length, await directCount("done")];
    rx.respond = () => ({ status: 400 });
    const stored = storedSubjects();
    await t.p.nc.flush();
    const id = await sendAndWait("direct-400", rx, warm + 1);
    const letters = await until(
      async () => {
        const l = await t.p.deadLetters.list("direct-400");
        return l.length > 0 && l;
      },
      { message: "the dead letter" },
    );
    expect(letters.map((l) => [l.messageId, l.attempts, l.body])).toEqual([
      [id, 1, rx.requests[warm]!.body.toString()],
    ]);
    expect(stored).toEqual([]);
    expect(await directCount("done")).toBe(before + 1);
  });

  it("dead letters of a direct and a stored delivery whose sequences are equal are both kept", async () => {
    // A server of its own, so that sequences are known: EVENTS and DELIVERIES both start at 1.
    const q = await pipeline();
    let r: RunningDispatcher | undefined;
    try {
      const rx = await t.receiver();
      rx.respond = () => ({ status: 400 });
      r = await q.dispatcher();
      await q.putDestination(destination({ id: "seqs", sourceIds: ["seqs"], urls: [rx.url("/seqs")] }));
      const ids: string[] = [];
      const send = async (n: number) => {
        const call = track({ sourceId: "seqs" });
        ids.push(call.messageId);
        await publishCall(q.js, call);
        await until(async () => (await q.deadLetters.list("seqs")).length >= n, {
          message: `${n} dead letters`,
        });
      };
      await send(1); // EVENTS 1, stored as DELIVERIES 1
      await send(2); // EVENTS 2, direct (the destination answered)
      // A new replica does not know the destination: the next call is stored, as DELIVERIES 2.
      await r.close();
      r = await q.dispatcher();
      await send(3);
      expect((await q.deadLetters.list("seqs")).map((l) => l.messageId).sort()).toEqual([...ids].sort());
    } finally {
      await r?.close();
      await q.close();
    }
  });

  it("a destination answering slowly (1 s) has every delivery stored first", async () => {
    // Well past the 250 ms bound and its allowance for the loop's lag on a loaded machine.
    const rx = await answered("direct-slow", {}, () => ({ status: 200, delayMs: 1_000 }), false);
    const stored = storedSubjects();
    await t.p.nc.flush();
    for (let i = 0; i < 3; i++) await sendAndWait("direct-slow", rx, i + 2);
    expect(stored.filter((s) => s.startsWith("hookpost.deliveries.")).length).toBe(3);
    expect(await directCount("done")).toBe(0);
  });

  it("DIRECT_DELIVERY off stores every delivery first", async () => {
    const rx = await answered("direct-off", { directDelivery: false }, undefined, false);
    const stored = storedSubjects();
    await t.p.nc.flush();
    for (let i = 0; i < 5; i++) await sendAndWait("direct-off", rx, i + 2);
    await until(() => stored.length >= 5, { message: "five deliveries stored" });
    expect(stored.every((s) => s.startsWith("hookpost.deliveries."))).toBe(true);
    expect(await directCount("done")).toBe(0);
  });
});
