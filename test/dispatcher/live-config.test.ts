import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  ConfigStore,
  DELIVERIES_STREAM,
  destinationSubjects,
  isNotFound,
  laneConsumer,
} from "@hookpost/core";
import type { RunningDispatcher } from "@hookpost/dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterValue } from "../e2e/helpers.js";
import { waitForRevision } from "../helpers/revisions.js";
import { until } from "../helpers/until.js";
import { destination, type Pipeline, pipeline, publishCall, track, useReceivers } from "./helpers.js";

/**
 * Configuration changes reach a running dispatcher within 2 s, without restart. Changes are made
 * through a separate ConfigStore connection, as the admin API on another replica would.
 */

let p: Pipeline;
let admin: ConfigStore;
let opsPort: number;
let dispatcher: RunningDispatcher;
/** Waits until the dispatcher applied a change (what the write returned), instead of sleeping. */
const applied = (revision: number) => waitForRevision(revision, [dispatcher]);
const { receiver } = useReceivers();

beforeAll(async () => {
  p = await pipeline();
  const d = await p.dispatcher({
    retryBaseDelayMs: 100,
    opsAddr: "127.0.0.1:0",
    topology: { retryMaxDelayMs: 300 } as never,
  });
  opsPort = d.opsPort!;
  dispatcher = d;
  admin = await ConfigStore.open(p.nc);
});

afterAll(async () => {
  admin?.close();
  await p?.close();
});

describe("live configuration", () => {
  it("picks up a new destination, then a URL change, within 2 s; retries go to the new URL", async () => {
    const a = await receiver();
    const b = await receiver();
    let t0 = Date.now();
    await admin.putDestination(destination({ id: "move", sourceIds: ["mv"], urls: [a.url()] }));
    const probes: string[] = [];
    await until(
      async () => {
        const probe = track({ sourceId: "mv" });
        probes.push(probe.messageId);
        await publishCall(p.js, probe);
        return a.requests.length > 0;
      },
      { timeout: 2000, message: "first delivery to a new destination" },
    );
    console.log(`new destination delivering after ${Date.now() - t0} ms`);
    // Probes routed after the change reached the router arrive; earlier ones were not routed.
    await until(() => a.messageIds().has(probes.at(-1)!), {
      message: "the last probe at the new destination",
    });

    // The endpoint starts failing; the operator moves the destination; the retry lands on b.
    // It fails this call only: a probe still on its way (only the last one was waited for) is
    // answered 200 and never retried to b ahead of it.
    const stuck = track({ sourceId: "mv" });
    a.respond = (req) => ({ status: req.headers["idempotency-key"] === stuck.messageId ? 500 : 200 });
    await publishCall(p.js, stuck);
    await until(() => a.requests.some((r) => r.headers["idempotency-key"] === stuck.messageId), {
      message: "the call's first attempt at a",
    });
    t0 = Date.now();
    await admin.putDestination({ ...admin.destination("move")!, urls: [b.url()] });
    await b.waitFor(1, 2000);
    console.log(`URL change applied after ${Date.now() - t0} ms`);
    expect(b.requests[0]!.headers["idempotency-key"]).toBe(stuck.messageId);
  });

  it("uses a changed secret and headers on the next attempt", async () => {
    const r = await receiver();
    // The first attempt is answered only once the dispatcher applied the change, so the change
    // lands while it is in flight (a fixed 400 ms could run out before a loaded machine applied it).
    let answerFirst = () => {};
    const changed = new Promise<void>((resolve) => {
      answerFirst = resolve;
    });
    r.respond = (req) => (req.n === 1 ? { status: 503, after: changed } : { status: 200 });
    await admin.putDestination(
      destination({
        id: "rotate",
        sourceIds: ["rot"],
        urls: [r.url()],
        sharedSecret: "old",
        headers: { "X-Env": "a" },
      }),
    );
    await applied(admin.revision);
    await publishCall(p.js, track({ sourceId: "rot" }));
    await r.waitFor(1);
    await applied(
      await admin.putDestination({
        ...admin.destination("rotate")!,
        sharedSecret: "new",
        headers: { "X-Env": "b" },
      }),
    );
    answerFirst();
    await r.waitFor(2);
    const [first, second] = r.requests;
    expect(first!.headers["x-signature"]).toBe(createHmac("sha1", "old").update(first!.body).digest("hex"));
    expect(second!.headers["x-signature"]).toBe(createHmac("sha1", "new").update(second!.body).digest("hex"));
    expect([first!.headers["x-env"], second!.headers["x-env"]]).toEqual(["a", "b"]);
  });

  it("a disabled destination gets nothing; its calls and retries wait and go out when it is enabled", async () => {
    const r = await receiver();
    r.respond = () => ({ status: 500 });
    await applied(
      await admin.putDestination(destination({ id: "pause", sourceIds: ["pz"], urls: [r.url()] })),
    );
    const pending = [track({ sourceId: "pz" }), track({ sourceId: "pz" })];
    for (const c of pending) await publishCall(p.js, c);
    await r.waitFor(2);

    await applied(await admin.putDestination({ ...admin.destination("pause")!, enabled: false }));
    // In-flight attempts end: every request the endpoint got has an outcome.
    await until(
      async () =>
        (await counterValue(dispatcher.metrics.registry, "hookpost_dispatcher_deliveries_total", {
          destination: "pause",
        })) >= r.requests.length,
      { message: "an outcome for every attempt made before the pause" },
    );
    r.respond = () => ({ status: 200 });
    const seen = r.requests.length;
    const whileOff = track({ sourceId: "pz" });
    await publishCall(p.js, whileOff);
    await sleep(1500); // not a wait: nothing is delivered while disabled (the assertion)
    expect(r.requests.length).toBe(seen);

    await admin.putDestination({ ...admin.destination("pause")!, enabled: true });
    // Calls that arrived while it was paused were kept and go out too.
    await until(
      () =>
        [...pending, whileOff].every((c) =>
          r.requests.some((x) => x.n > seen && x.headers["idempotency-key"] === c.messageId),
        ),
      { timeout: 5000, message: "backlog after re-enabling" },
    );
  });

  it("deleting a destination deletes its consumer and purges its pending deliveries", async () => {
    const r = await receiver();
    r.respond = () => ({ status: 500 });
    await applied(
      await admin.putDestination(destination({ id: "gone", sourceIds: ["gn"], urls: [r.url()] })),
    );
    for (let i = 0; i < 3; i++) await publishCall(p.js, track({ sourceId: "gn" }));
    await r.waitFor(3);
    await admin.deleteDestination("gone");
    await until(
      async () => {
        for (const filter of destinationSubjects("gone")) {
          const info = await p.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
          if (Object.keys(info.state.subjects ?? {}).length > 0) return false;
        }
        try {
          await p.jsm.consumers.info(DELIVERIES_STREAM, laneConsumer("gone"));
          return false;
        } catch (err) {
          return isNotFound(err);
        }
      },
      { timeout: 10_000, message: "consumer deletion and purge" },
    );
    await applied(admin.revision);
    const seen = r.requests.length;
    await publishCall(p.js, track({ sourceId: "gn" }));
    await sleep(1000); // not a wait: nothing is delivered after the deletion (the assertion)
    expect(r.requests.length).toBe(seen);
  });

  it("serves /healthz, /readyz and Prometheus /metrics on the ops port", async () => {
    const get = (path: string) => fetch(`http://127.0.0.1:${opsPort}${path}`);
    expect((await get("/healthz")).status).toBe(200);
    expect((await get("/readyz")).status).toBe(200);
    const metrics = await (await get("/metrics")).text();
    expect(metrics).toMatch(
      /hookpost_dispatcher_deliveries_total\{outcome="delivered",destination="move"\} \d+/,
    );
    expect(metrics).toMatch(/hookpost_dispatcher_attempt_seconds_bucket/);
    expect(metrics).toMatch(/hookpost_dispatcher_retries_total \d+/);
    expect(metrics).toMatch(/hookpost_dispatcher_consumer_backlog\{destination="move"\} \d+/);
    expect(metrics).toMatch(/hookpost_dispatcher_events_routed_total\{outcome="routed"\}/);
    expect((await get("/nope")).status).toBe(404);
  });
});
