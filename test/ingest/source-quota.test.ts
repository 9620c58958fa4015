import type { SourceQuotaSettings } from "@hookpost/api";
import { SourceQuota, startIngest } from "@hookpost/api";
import { Code } from "@hookpost/contract";
import { Ordering } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  type ConfigStore,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  EVENTS_STREAM,
  eventSubject,
  ORDERED_STREAM,
} from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOB, eventsOf, expectOnlyARefusedUntilDrained, sendUntilRefused } from "../helpers/source-quota.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { post } from "../http/helpers.js";
import { failure, Harness, silentLogger, testConfig, useHarness } from "./harness.js";

const KIB = 1024;
const quota = (o: Partial<SourceQuotaSettings>): SourceQuotaSettings => ({
  maxPendingBytes: 1024 * KIB,
  maxRate: 10_000,
  burst: 20_000,
  refreshMs: 200,
  ...o,
});

describe("pending bytes per source (no router: calls stay on EVENTS)", () => {
  // EVENTS holds 1 MiB; a source may have 64 KiB pending: A at its quota leaves room for B.
  const h = useHarness({
    topology: { eventsMaxBytes: 1024 * KIB },
    config: { httpAddress: "127.0.0.1:0", quota: quota({ maxPendingBytes: 64 * KIB }) },
  });
  it("source A at its quota gets 429 + Retry-After (HTTP) and RESOURCE_EXHAUSTED + RetryInfo (gRPC); B gets 10 of 10", async () => {
    const a = await h.source("A");
    const b = await h.source("B");
    const { refused, accepted } = await sendUntilRefused([h.httpBase], a.writeKey);
    expect(refused, "A was refused before EVENTS filled").toBeDefined();
    expect(refused!.status).toBe(429);
    expect(refused!.body.code).toBe("RESOURCE_EXHAUSTED");
    expect(refused!.body.message).toContain("SOURCE_MAX_PENDING_BYTES");
    expect(Number(refused!.headers.get("retry-after"))).toBeGreaterThan(0);
    // Stopped near its quota, far from the stream's limit.
    const { state } = await h.jsm.streams.info(EVENTS_STREAM);
    expect(state.bytes).toBeLessThan(256 * KIB);
    expect(accepted).toBeGreaterThan(5);

    const grpc = await failure(a.client.track({ userId: "u", event: "E", properties: {} }));
    expect(grpc.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(grpc.retryAfterMs).toBeGreaterThan(0);
    // Nor does a sync start for A (it would add a call per member).
    const sync = await failure(a.client.syncAudience([{ audienceName: "vip", userIds: ["x", "y"] }]));
    expect(sync.code).toBe(Code.RESOURCE_EXHAUSTED);

    // B keeps being accepted, on both transports.
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post(
          h.httpBase,
          "/v1/track",
          { userId: "u", event: "E", messageId: `b-${i}`, properties: { blob: BLOB } },
          { writeKey: b.writeKey },
        ),
      ),
    );
    expect(answers.filter((r) => r.status === 200)).toHaveLength(10);
    const viaGrpc = await Promise.allSettled(
      Array.from({ length: 10 }, () => b.client.track({ userId: "u", event: "E", properties: {} })),
    );
    expect(viaGrpc.filter((r) => r.status === "fulfilled")).toHaveLength(10);
    expect((await b.client.syncAudience([{ audienceName: "vip", userIds: ["x", "y"] }])).members).toBe(2n);
    expect(await h.find("b-9")).toBeDefined();
    const metrics = await h.ingest.metrics.registry.getSingleMetricAsString(
      "hookpost_ingest_quota_refused_total",
    );
    expect(metrics).toMatch(/limit="pending_bytes"} [1-9]/);
  });

  it("two ingest replicas share A's figure (read from JetStream): together they stop A near its quota; purged, A is accepted again", async () => {
    const a = await h.source("A2");
    const b = await h.source("B2");
    const replica = await startIngest(
      testConfig(h.nats.url, {
        httpAddress: "127.0.0.1:0",
        topology: { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 1024 * KIB },
        quota: quota({ maxPendingBytes: 64 * KIB }),
      }),
      { logger: silentLogger() },
    );
    try {
      const urls = [h.httpBase, `http://${replica.httpAddress}`];
      const { refused } = await sendUntilRefused(urls, a.writeKey, { paceEvery: 4 });
      expect(refused?.status).toBe(429);
      // Not a quota per replica (2 x 64 KiB): one quota, give or take a refresh.
      expect((await eventsOf(h.jsm, a.id)) * 4 * KIB).toBeLessThan(96 * KIB);
      await expectOnlyARefusedUntilDrained(h.jsm, urls, a, b);
    } finally {
      await replica.close();
    }
  });
});

describe("the pending-bytes figure", () => {
  const h = useHarness({ config: { httpAddress: "127.0.0.1:0" } });
  it("counts a call once when its PubAck comes back while a refresh reads the streams", async () => {
    // The config store is read only for DELIVERIES subjects: there are none here.
    const store = { destination: () => undefined } as unknown as ConfigStore;
    const q = new SourceQuota(quota({ refreshMs: 60_000 }), { jsm: h.jsm, store, log: silentLogger() });
    const js = h.nc.jetstream();
    const data = JSON.stringify({ blob: BLOB });
    const first = await js.publish(eventSubject("Q", "track"), data);
    const reading = q.refresh(); // reads EVENTS, which already holds the call...
    q.stored("Q", { bytes: data.length, seq: first.seq }, 1); // ...whose answer is counted after
    await reading;
    expect(q.pendingBytes("Q")).toBe(data.length); // was twice: Q refused at half its quota
    // A call stored after the read is counted until the next read holds it.
    const second = await js.publish(eventSubject("Q", "track"), data);
    q.stored("Q", { bytes: data.length, seq: second.seq }, 1);
    expect(q.pendingBytes("Q")).toBe(2 * data.length);
    await q.refresh();
    expect(q.pendingBytes("Q")).toBe(2 * data.length);
  });
});

describe("default quota", () => {
  it("with default settings one source stops far below the streams' limits (1/16 of them)", async () => {
    // Streams scaled down to 1 MiB; everything else default (quota derived from the streams).
    const h = await Harness.start({
      topology: { eventsMaxBytes: 1024 * KIB, deliveriesMaxBytes: 1024 * KIB },
      config: { httpAddress: "127.0.0.1:0" },
    });
    try {
      const a = await h.source("A");
      const { refused } = await sendUntilRefused([h.httpBase], a.writeKey);
      expect(refused?.status).toBe(429);
      expect(refused?.body.message).toContain("SOURCE_MAX_PENDING_BYTES");
      const { state } = await h.jsm.streams.info(EVENTS_STREAM);
      expect(state.bytes).toBeLessThan(128 * KIB);
    } finally {
      await h.close();
    }
  });
});

// A failing endpoint holds its calls on DELIVERIES, or on ORDERED for a PER_USER destination:
// uncounted there, one source could fill that stream for every source.
for (const held of [
  { stream: DELIVERIES_STREAM, ordering: Ordering.UNSPECIFIED },
  { stream: ORDERED_STREAM, ordering: Ordering.PER_USER },
]) {
  describe(`pending bytes on ${held.stream} (a failing destination)`, () => {
    let stack: Stack;

    beforeAll(async () => {
      stack = await Stack.start({
        ingest: {
          httpAddress: "127.0.0.1:0",
          topology: { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 1024 * KIB, deliveriesMaxBytes: 1024 * KIB },
          quota: quota({ maxPendingBytes: 64 * KIB }),
        },
      });
    });

    afterAll(async () => {
      await stack?.close();
    });

    it(`A's calls held on ${held.stream} count against A alone; once its receiver takes them, A is accepted again`, async () => {
      const base = `http://${stack.ingest.httpAddress}`;
      const a = await stack.source("A");
      const b = await stack.source("B");
      const { ordering } = held;
      await stack.destination({ sourceIds: [a.id], ordering, urls: [stack.receiver.url("/a")] });
      await stack.destination({ sourceIds: [b.id], ordering, urls: [stack.receiver.url("/b")] });
      let failing = true;
      stack.receiver.respond = (req) => ({ status: failing && req.url === "/a" ? 503 : 200 });
      // Slower than the refresh now and then, so that A's backlog is seen where it is held too.
      const { refused, accepted } = await sendUntilRefused([base], a.writeKey, { paceEvery: 8, paceMs: 250 });
      expect(refused?.status, `refused after ${accepted} calls of 4 KiB`).toBe(429);
      const jsm = await stack.nc.jetstreamManager();
      const { stream } = held;
      expect((await jsm.streams.info(stream)).state.messages, `A's calls wait on ${stream}`).toBeGreaterThan(
        0,
      );
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          post(
            base,
            "/v1/track",
            { userId: "u", event: "E", properties: { blob: BLOB } },
            { writeKey: b.writeKey },
          ),
        ),
      );
      expect(answers.filter((r) => r.status === 200)).toHaveLength(10);
      failing = false;
      await until(
        async () =>
          (await post(base, "/v1/track", { userId: "u", event: "E" }, { writeKey: a.writeKey })).status ===
          200,
        { timeout: 60_000, message: "A accepted again once its calls were delivered" },
      );
    });
  });
}

describe("rate per source", () => {
  const h = useHarness({
    config: { httpAddress: "127.0.0.1:0", quota: quota({ maxRate: 1, burst: 5 }) },
  });
  it("over its rate, A gets 429 + Retry-After and RESOURCE_EXHAUSTED + RetryInfo; B is accepted", async () => {
    const a = await h.source("A");
    const b = await h.source("B");
    const calls = (n: number) => ({
      batch: Array.from({ length: n }, () => ({ type: "track", userId: "u", event: "E" })),
    });
    // Twice the burst, which a full bucket lets through: A's bucket is 5 calls in debt, so A is
    // refused for 6 s, not 1 s. A refill (1 call/s) between this batch and the two calls below
    // that must be refused would let one in: 1 s was within reach of a loaded machine's stall.
    expect((await post(h.httpBase, "/v1/batch", calls(10), { writeKey: a.writeKey })).status).toBe(200);
    const r = await post(h.httpBase, "/v1/track", { userId: "u", event: "E" }, { writeKey: a.writeKey });
    expect(r.status).toBe(429);
    expect(r.body.message).toContain("SOURCE_MAX_RATE");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const grpc = await failure(a.client.track({ userId: "u", event: "E", properties: {} }));
    expect(grpc.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(grpc.retryAfterMs).toBeGreaterThan(0);

    expect((await post(h.httpBase, "/v1/batch", calls(5), { writeKey: b.writeKey })).status).toBe(200);
    // A is accepted again once its bucket refilled (1 call/s: about 6 s after its batch).
    await until(
      async () => {
        const again = await post(
          h.httpBase,
          "/v1/track",
          { userId: "u", event: "E" },
          { writeKey: a.writeKey },
        );
        return again.status === 200;
      },
      { message: "A accepted again at its rate" },
    );
  });
});

describe("a sync's calls count toward its source's pending bytes", () => {
  // EVENTS holds 1 MiB (no router: calls stay there); A may have 64 KiB pending.
  const h = useHarness({
    topology: { eventsMaxBytes: 1024 * KIB },
    config: { httpAddress: "127.0.0.1:0", quota: quota({ maxPendingBytes: 64 * KIB }) },
  });
  it("a sync admitted under A's quota stops near it (RESOURCE_EXHAUSTED + RetryInfo), not when EVENTS is full; B is accepted", async () => {
    const a = await h.source("A");
    const b = await h.source("B");
    // About 3 MiB of identify calls: far more than A's quota, and than all of EVENTS.
    const members = Array.from({ length: 6_000 }, (_, i) => `member-${String(i).padStart(100, "0")}`);
    const chunks = Array.from({ length: 6 }, (_, c) => ({
      audienceName: c === 0 ? "Everyone" : "",
      userIds: members.slice(c * 1_000, (c + 1) * 1_000),
    }));
    const refused = await failure(a.client.syncAudience(chunks));
    expect(refused.code, refused.message).toBe(Code.RESOURCE_EXHAUSTED);
    expect(refused.message).toContain("SOURCE_MAX_PENDING_BYTES");
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    // Stopped near A's quota, far from the stream's limit.
    const { state } = await h.jsm.streams.info(EVENTS_STREAM);
    expect(state.bytes).toBeLessThan(256 * KIB);

    // B keeps being accepted, on both transports.
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        post(
          h.httpBase,
          "/v1/track",
          { userId: "u", event: "E", properties: { blob: BLOB } },
          { writeKey: b.writeKey },
        ),
      ),
    );
    expect(answers.filter((r) => r.status === 200)).toHaveLength(10);
    await b.client.track({ userId: "u", event: "E", properties: {} });

    // Once A's calls are gone (delivered), A is accepted again.
    await h.jsm.streams.purge(EVENTS_STREAM, { filter: `hookpost.events.${a.id}.>` });
    await until(
      async () =>
        (await post(h.httpBase, "/v1/track", { userId: "u", event: "E" }, { writeKey: a.writeKey }))
          .status === 200,
      { message: "A accepted again once its calls left EVENTS" },
    );
  });
});
