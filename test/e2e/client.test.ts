import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type { IngestHandle } from "@hookpost/api";
import { Analytics, type AnalyticsError, type AnalyticsOptions, LIBRARY } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { Stack } from "../helpers/stack.js";
import {
  bodies,
  counterValue,
  freePort,
  ingestOn,
  LossyProxy,
  STACK_OPTIONS,
  settledCount,
} from "./helpers.js";

/*
 * The client library (SPEC section 8) against the real pipeline: Analytics -> ingest (gRPC
 * Batch) -> JetStream -> dispatcher -> a real HTTP receiver. "Delivered" means the webhook
 * arrived at the receiver.
 */

let stack: Stack;
const receivers: Receiver[] = [];
const clients: Analytics[] = [];
/** `error` events of clients made with analytics(); each test that expects some takes them. */
const errors: AnalyticsError[] = [];

beforeAll(async () => {
  stack = await Stack.start(STACK_OPTIONS);
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close({ timeoutMs: 2_000 })));
  expect(errors.splice(0).map((e) => e.message)).toEqual([]);
});

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await stack?.close();
});

/** A source with one destination that delivers to a receiver of its own. */
async function lane(name: string): Promise<{ writeKey: string; rx: Receiver }> {
  const rx = await Receiver.http();
  receivers.push(rx);
  const src = await stack.source(name);
  await stack.destination({ name, sourceIds: [src.id], urls: [rx.url()] });
  return { writeKey: src.writeKey, rx };
}

function analytics(writeKey: string, options: AnalyticsOptions = {}): Analytics {
  const a = new Analytics(writeKey, { endpoint: stack.ingest.address, ...options });
  a.on("error", (err) => errors.push(err));
  clients.push(a);
  return a;
}

/**
 * Each of `ids` delivered exactly once and nothing else: as many requests arrive as there are ids
 * (within `timeoutMs`), no more come for `settleMs` (a copy would), and they carry those ids.
 */
async function deliveredOnce(rx: Receiver, ids: Iterable<string>, settleMs: number, timeoutMs?: number) {
  const want = new Set(ids);
  await rx.waitFor(want.size, timeoutMs);
  expect(await settledCount(rx, settleMs)).toBe(want.size);
  expect(rx.messageIds()).toEqual(want);
}

/**
 * A client of a lane through `endpoint`, an ingest or proxy the test then interrupts: batches of 10
 * (sent when full or flushed), quick retries. Its first call is delivered before it returns, so the
 * connection stands when the test breaks it; `ids` starts with that call's.
 */
async function warmClient(
  writeKey: string,
  rx: Receiver,
  endpoint: string,
  options: AnalyticsOptions = {},
): Promise<{ a: Analytics; ids: string[] }> {
  const a = analytics(writeKey, {
    endpoint,
    flushAt: 10,
    flushAfter: 60_000,
    retryInitialDelayMs: 100,
    retryMaxDelayMs: 500,
    ...options,
  });
  const ids = [a.track({ userId: "warm", event: "Warm Up" })];
  await a.flush();
  await rx.waitFor(1);
  return { a, ids };
}

/** Batch RPCs the given ingest answered with OK so far. */
const batchesOk = (ingest: IngestHandle = stack.ingest) =>
  counterValue(ingest.metrics.registry, "hookpost_ingest_calls_total", {
    method: "IngestService/Batch",
    code: "OK",
  });

/** Calls the ingest recognized as copies of stored ones (JetStream deduplication) so far. */
const duplicateCalls = () =>
  counterValue(stack.ingest.metrics.registry, "hookpost_ingest_events_total", { outcome: "duplicate" });

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

describe("client library through the real pipeline", () => {
  it("flushAt 20: 45 calls deliver 40 at once, the last 5 only on close()", async () => {
    const { writeKey, rx } = await lane("flush-at");
    const batchesBefore = await batchesOk();
    const a = analytics(writeKey, { flushAt: 20, flushAfter: 60_000 });
    const ids = Array.from({ length: 45 }, (_, i) => a.track({ userId: `u${i}`, event: "Clicked" }));

    await rx.waitFor(40);
    expect(await settledCount(rx, 1_000)).toBe(40);
    expect(a.queued).toBe(5);
    expect((await batchesOk()) - batchesBefore).toBe(2);
    expect(rx.messageIds()).toEqual(new Set(ids.slice(0, 40)));

    await a.close();
    await deliveredOnce(rx, ids, 300);
    expect((await batchesOk()) - batchesBefore).toBe(3);
  });

  it("flushAfter 300 ms: queued calls go out on their own, without more calls or close()", async () => {
    const { writeKey, rx } = await lane("flush-after");
    const batchesBefore = await batchesOk();
    const a = analytics(writeKey, { flushAt: 100, flushAfter: 300 });
    const started = Date.now();
    const ids = [0, 1, 2].map((i) => a.identify({ userId: `u${i}`, traits: { n: i } }));

    await sleep(150); // not a wait: nothing goes out before flushAfter (the assertion)
    expect(rx.requests).toHaveLength(0);
    expect((await batchesOk()) - batchesBefore).toBe(0);

    await rx.waitFor(3);
    expect(rx.requests[0]!.at - started).toBeGreaterThanOrEqual(300);
    expect(rx.messageIds()).toEqual(new Set(ids));
    expect((await batchesOk()) - batchesBefore).toBe(1); // one batch with the three calls
    expect(a.queued).toBe(0);
    expect(a.closed).toBe(false);
  });

  it("flushAt 1: every call is sent at once, one Batch per call", async () => {
    const { writeKey, rx } = await lane("flush-at-1");
    const batchesBefore = await batchesOk();
    const a = analytics(writeKey, { flushAt: 1, flushAfter: 60_000 });
    for (let i = 0; i < 3; i++) {
      const id = a.page({ anonymousId: `anon${i}`, name: "Home" });
      const reqs = await rx.waitFor(i + 1);
      expect(reqs[i]!.headers["idempotency-key"]).toBe(id);
      expect((await batchesOk()) - batchesBefore).toBe(i + 1);
    }
    expect(await settledCount(rx, 300)).toBe(3);
  });

  it("a 3000-call burst of ~1 KiB calls is delivered exactly once each", async () => {
    const { writeKey, rx } = await lane("burst");
    const batchesBefore = await batchesOk();
    const a = analytics(writeKey, { flushAfter: 60_000 });
    const blob = "x".repeat(1024);
    const ids = new Set<string>();
    for (let i = 0; i < 3000; i++) {
      ids.add(a.track({ userId: `u${i}`, event: "Bulk", properties: { i, blob } }));
    }
    expect(ids.size).toBe(3000);
    await a.flush();
    // ~3.2 MB: at least 7 batches under 500 KiB; calls that waited left in full batches.
    const batches = (await batchesOk()) - batchesBefore;
    expect(batches).toBeGreaterThanOrEqual(7);
    expect(batches).toBeLessThan(150);

    // Generous: a pipeline stall (see STACK_OPTIONS) must not fail this on a loaded machine.
    await deliveredOnce(rx, ids, 500, 45_000);
    const seen = new Set(bodies(rx).map((b) => (b.properties as { i: number }).i));
    expect(seen.size).toBe(3000);
  }, 90_000);

  it("a batch retried while the ingest was down is stored and delivered once", async () => {
    const { writeKey, rx } = await lane("ingest-down");
    const address = `127.0.0.1:${await freePort()}`;
    let own = await ingestOn(stack.nats.url, address);
    try {
      const { a, ids } = await warmClient(writeKey, rx, address, { maxRetries: 30 });

      await own.close();
      // Two batches of 10 leave at once (and fail), five wait in the queue.
      for (let i = 0; i < 25; i++) ids.push(a.track({ userId: `u${i}`, event: "While Down" }));
      const flushed = a.flush();
      // not a wait: while ingest is down nothing gets through, and flush() keeps retrying (the assertion)
      await sleep(800);
      expect(rx.requests).toHaveLength(1);

      own = await ingestOn(stack.nats.url, address);
      await flushed;
      expect(errors).toEqual([]);
      await deliveredOnce(rx, ids, 800);
    } finally {
      await own.close();
    }
  });

  it("a batch stored whose answer was lost is retried with the same ids and not delivered twice", async () => {
    const { writeKey, rx } = await lane("lost-answer");
    const proxy = await LossyProxy.start(Number(stack.ingest.address.split(":").pop()));
    try {
      const { a, ids } = await warmClient(writeKey, rx, proxy.target);
      const duplicatesBefore = await duplicateCalls();

      proxy.swallow = true;
      for (let i = 0; i < 10; i++) ids.push(a.track({ userId: `u${i}`, event: "Answer Lost" }));
      // Stored and delivered, while the client still waits for the answer.
      await rx.waitFor(11);
      proxy.swallow = false;
      proxy.cut(); // the client sees the connection drop (UNAVAILABLE) and sends the batch again
      await a.flush();
      expect(errors).toEqual([]);

      // The retry reached the ingest, and JetStream recognized every call as a copy.
      expect((await duplicateCalls()) - duplicatesBefore).toBe(10);
      await deliveredOnce(rx, ids, 800);
    } finally {
      await proxy.close();
    }
  });

  it("an unreachable endpoint produces the error event with the calls; re-enqueued, they are delivered", async () => {
    const { writeKey, rx } = await lane("unreachable");
    const a = analytics(writeKey, {
      endpoint: `127.0.0.1:${await freePort()}`, // nothing listens there
      flushAt: 100,
      flushAfter: 60_000,
      maxRetries: 2,
      retryInitialDelayMs: 20,
    });
    const callbacks: Array<AnalyticsError | undefined> = [];
    const ids = [
      a.track({ userId: "u1", event: "Lost", properties: { n: 1 } }, (err) => callbacks.push(err)),
      a.identify({ userId: "u1", traits: { plan: "pro" } }, (err) => callbacks.push(err)),
    ];
    await a.flush();

    expect(errors).toHaveLength(1);
    const err = errors.splice(0)[0]!;
    expect(err.code).toBe("delivery_failed");
    expect(err.grpcCode).toBe(Code.UNAVAILABLE);
    expect(err.message).toMatch(/2 call\(s\) not stored after 3 attempt\(s\)/);
    expect(err.calls.map((c) => c.messageId)).toEqual(ids);
    expect(err.calls.map((c) => c.type)).toEqual(["track", "identify"]);
    expect(err.calls[0]).toMatchObject({ userId: "u1", event: "Lost", properties: { n: 1 } });
    expect(err.calls[1]).toMatchObject({ userId: "u1", traits: { plan: "pro" } });
    expect(callbacks).toEqual([err, err]);
    expect(rx.requests).toHaveLength(0);

    // The reported calls, enqueued again once the ingest is reachable, keep their ids. As calls.ts
    // documents it, `analytics[call.type](call)`: `call.type` picks the method at run time (TypeScript
    // cannot check a union of calls against the union of methods, hence `as never`).
    a.endpoint = stack.ingest.address;
    for (const call of err.calls) a[call.type](call as never);
    await a.flush();
    await deliveredOnce(rx, ids, 300);
  });

  it("the webhook body of a client call carries context.library", async () => {
    const { writeKey, rx } = await lane("library");
    const a = analytics(writeKey, { flushAt: 1 });
    const id = a.track({
      userId: "u-lib",
      event: "Signed Up",
      properties: { plan: "pro" },
      context: { ip: "203.0.113.9" },
      timestamp: new Date("2026-11-21T09:30:00.000Z"),
    });
    const [req] = await rx.waitFor(1);
    expect(LIBRARY).toEqual({ name: "hookpost", version: PACKAGE_VERSION });
    expect(req!.headers["idempotency-key"]).toBe(id);
    expect(req!.body.toString()).toBe(
      '{"version":1,"type":"track","userId":"u-lib","event":"Signed Up","properties":{"plan":"pro"},' +
        '"timestamp":"2026-11-21T09:30:00.000Z",' +
        `"context":{"ip":"203.0.113.9","library":{"name":"hookpost","version":"${PACKAGE_VERSION}"}}}`,
    );
  });
});
