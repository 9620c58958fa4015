import type { HookpostError } from "@hookpost/contract";
import { Code } from "@hookpost/contract";
import type { DeadLetterRecord } from "@hookpost/core";
import {
  CONFIG_BUCKET,
  DEAD_STREAM,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  DeadLetters,
  DISPATCHERS_BUCKET,
  EVENTS_STREAM,
  ensureTopology,
  kvStream,
  streamLimits,
} from "@hookpost/core";
import { DiscardPolicy } from "nats";
import { describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { post } from "../http/helpers.js";
import { failure, NO_SOURCE_QUOTA, useHarness } from "./harness.js";

const KIB = 1024;
const DEAD_MAX = 16 * KIB;
const CONFIG_MAX = 64 * KIB;

const h = useHarness({
  topology: { deadLetterMaxBytes: DEAD_MAX, configMaxBytes: CONFIG_MAX },
  config: { streamCheckMs: 200 },
});

/** The value of hookpost_stream_full_total for a stream and policy on the ingest's /metrics. */
async function fullCount(stream: string, policy: string): Promise<number> {
  const m = await h.ingest.metrics.registry.getSingleMetric("hookpost_stream_full_total")?.get();
  return m?.values.find((v) => v.labels.stream === stream && v.labels.policy === policy)?.value ?? 0;
}

const letter = (i: number): DeadLetterRecord => ({
  messageId: `m-${i}`,
  destinationId: "dst_1",
  sourceId: "src_1",
  body: "x".repeat(KIB),
  attempts: 3,
  outcomes: [],
  reason: "retry window exceeded",
  firstAttemptTime: new Date().toISOString(),
  deadTime: new Date().toISOString(),
});

describe("every stream has a byte limit", () => {
  it("every stream Hookpost creates has one once ingest runs (buckets included)", async () => {
    expect((await h.jsm.streams.info(kvStream(CONFIG_BUCKET))).config.max_bytes).toBe(CONFIG_MAX);
    const limits = new Map(
      streamLimits({ ...DEFAULT_TOPOLOGY, deadLetterMaxBytes: DEAD_MAX }).map((l) => [l.stream, l]),
    );
    for await (const si of h.jsm.streams.list()) {
      // Every stream there is one of ours, with a limit (the dispatchers bucket: no dispatcher here).
      expect(limits.has(si.config.name), si.config.name).toBe(true);
      expect(si.config.max_bytes, si.config.name).toBeGreaterThan(0);
    }
    // A bucket created later (as a dispatcher does) gets its limit at the next stream check.
    await h.nc.jetstream().views.kv(DISPATCHERS_BUCKET, { history: 1 });
    await until(
      async () => {
        const info = await h.jsm.streams.info(kvStream(DISPATCHERS_BUCKET));
        return info.config.max_bytes === limits.get(kvStream(DISPATCHERS_BUCKET))?.maxBytes;
      },
      { message: "the dispatchers bucket limited" },
    );
  });

  it("a DEAD stream at its limit drops its oldest dead letters, keeps the newest, and counts the drops", async () => {
    const dead = await DeadLetters.open(h.nc);
    // A check before the writes, so that the next one sees what was removed.
    await until(
      async () => {
        const m = await h.ingest.metrics.registry.getSingleMetric("hookpost_stream_max_bytes")?.get();
        return m?.values.some((v) => v.labels.stream === DEAD_STREAM && v.value === DEAD_MAX) ?? false;
      },
      { message: "DEAD seen by the stream check" },
    );
    for (let i = 0; i < 40; i++) await dead.record(letter(i), `k-${i}`);
    const { state, config } = await h.jsm.streams.info(DEAD_STREAM);
    expect(config.discard).toBe(DiscardPolicy.Old);
    expect(state.bytes).toBeLessThanOrEqual(DEAD_MAX);
    expect(state.messages).toBeLessThan(40);
    const kept = await dead.list("dst_1", { pageSize: 100 });
    expect(kept.at(-1)?.messageId).toBe("m-39");
    expect(kept.some((l) => l.messageId === "m-0")).toBe(false);
    const dropped = 40 - state.messages;
    await until(async () => (await fullCount(DEAD_STREAM, "drop_oldest")) === dropped, {
      message: "the drops counted",
    });
  });

  it("a full configuration bucket refuses writes with RESOURCE_EXHAUSTED, counted", async () => {
    let refused: HookpostError | undefined;
    for (let i = 0; i < 400 && !refused; i++) {
      try {
        await h.admin.createSource({ name: `source ${i} ${"n".repeat(100)}` });
      } catch (err) {
        refused = err as HookpostError;
      }
    }
    expect(refused, "the configuration bucket filled up").toBeDefined();
    expect(refused!.code, refused!.message).toBe(Code.RESOURCE_EXHAUSTED);
    expect(await fullCount(kvStream(CONFIG_BUCKET), "refuse_new")).toBeGreaterThan(0);
  });

  it("a refuse-new stream is never lowered below what it holds (nats-server would drop the oldest)", async () => {
    await h.jsm.streams.purge(EVENTS_STREAM);
    const js = h.nc.jetstream();
    for (let i = 0; i < 8; i++) await js.publish(`hookpost.events.s.track`, "y".repeat(4 * KIB));
    const held = (await h.jsm.streams.info(EVENTS_STREAM)).state.bytes;
    await ensureTopology(h.jsm, { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 8 * KIB });
    const after = await h.jsm.streams.info(EVENTS_STREAM);
    expect(after.state.messages).toBe(8);
    expect(after.config.max_bytes).toBe(held);
    await h.jsm.streams.purge(EVENTS_STREAM);
    await ensureTopology(h.jsm, { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 8 * KIB });
    expect((await h.jsm.streams.info(EVENTS_STREAM)).config.max_bytes).toBe(8 * KIB);
  });
});

describe("DELIVERIES full", () => {
  it("the router waits (the call stays on EVENTS) and counts each refused fan-out", async () => {
    const topology = { ...DEFAULT_TOPOLOGY, deliveriesMaxBytes: 16 * KIB };
    const stack = await Stack.start({
      ingest: { topology, quota: NO_SOURCE_QUOTA },
      dispatcher: { topology },
    });
    try {
      const src = await stack.source("A");
      await stack.destination({ sourceIds: [src.id] });
      stack.receiver.respond = () => ({ status: 503 });
      const blob = "x".repeat(4 * KIB);
      for (let i = 0; i < 8; i++) await src.client.track({ userId: "u", event: "E", properties: { blob } });
      const registry = stack.dispatchers[0]!.metrics.registry;
      await until(
        async () => {
          const m = await registry.getSingleMetric("hookpost_stream_full_total")?.get();
          return m?.values.some((v) => v.labels.stream === DELIVERIES_STREAM && v.value > 0) ?? false;
        },
        { message: "a refused fan-out counted" },
      );
      // Nothing lost: what DELIVERIES refused waits on EVENTS.
      expect(
        (await stack.nc.jetstreamManager().then((j) => j.streams.info(EVENTS_STREAM))).state.messages,
      ).toBeGreaterThan(0);
    } finally {
      await stack.close();
    }
  });
});

describe("user index full", () => {
  // A few hundred (user, source) pairs fill it; no per-source quota in the way.
  const hi = useHarness({
    topology: { userIndexMaxBytes: 16 * KIB },
    config: { httpAddress: "127.0.0.1:0", quota: NO_SOURCE_QUOTA, streamCheckMs: 200 },
  });

  it("a call of a user not yet recorded gets 429 + Retry-After, and is not stored (nothing of a refused call is)", async () => {
    const src = await hi.source("A");
    const track = (i: number) =>
      post(
        hi.httpBase,
        "/v1/track",
        { userId: `user-${i}`, event: "E", messageId: `m-${i}` },
        { writeKey: src.writeKey },
      );
    let refused: { i: number; answer: Awaited<ReturnType<typeof track>> } | undefined;
    for (let i = 0; i < 2_000 && !refused; i++) {
      const answer = await track(i);
      if (answer.status !== 200) refused = { i, answer };
    }
    expect(refused, "the user index filled up").toBeDefined();
    expect(refused!.answer.status, JSON.stringify(refused!.answer.body)).toBe(429);
    expect(Number(refused!.answer.headers.get("retry-after"))).toBeGreaterThan(0);
    // Answered "not stored": it must not be on EVENTS either (it would be delivered, and a
    // deletion of that user could not reach this source).
    expect(await hi.find(`m-${refused!.i}`)).toBeUndefined();
    // A user already recorded is still accepted.
    expect((await track(0)).status).toBe(200);
    // So with a sync: its new members cannot be recorded, so none of their identify calls is stored.
    const before = await hi.messageCount();
    const sync = await failure(
      src.client.syncAudience([{ audienceName: "vip", userIds: ["new-1", "new-2", "new-3"] }]),
    );
    expect(sync.code, sync.message).toBe(Code.RESOURCE_EXHAUSTED);
    expect(await hi.messageCount()).toBe(before);
  });
});
