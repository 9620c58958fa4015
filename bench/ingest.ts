/**
 * Ingest benchmark (issue 13): Hookpost ingest (its own process, as in production) next to the
 * limits of the same machine, measured in the same run:
 *
 * - raw nats.js JetStream async publish of the same payloads (pipelined, from this process);
 * - raw gRPC of an empty IngestService handler (own process, same server code): unary Track,
 *   Batch of 100 calls, and one client stream (SyncAudience chunks).
 *
 * Hookpost figures: gRPC Batch, unary Track, and the Segment-compatible HTTP API (`/v1/batch`
 * of the same 100 calls as JSON, 8 in flight over keep-alive connections).
 *
 * The generic gRPC client used for these figures encodes each request with protobuf-es
 * (`create` + `toBinary`: ~80 µs of the bench process's CPU per call with Structs, more than
 * ingest spends on it), which caps both the raw gRPC Batch limit and the Batch figure on 2 cores.
 * The "SDK frames" figures send the same calls encoded as hookpost/client encodes them
 * (packages/client/src/call-encoder.ts, a few µs per call), to both the empty handler and ingest.
 *
 *   npm run bench -- ingest          BENCH_CALLS=50000 npm run bench -- ingest
 *   BENCH_CPU_PROF=/tmp/prof npm run bench -- ingest   # .cpuprofile of the ingest process
 */
import { batchRequestOf, encodeFrame } from "@hookpost/client";
import { MAX_CALL_BYTES } from "@hookpost/contract";
import { DEFAULT_TOPOLOGY, ensureTopology } from "@hookpost/core";
import { connect } from "nats";
import { Pool } from "undici";
import { NatsServer } from "../test/helpers/nats-server.js";
import { type IngestClient, ingestClient } from "../test/helpers/stack.js";
import { pipelined, publishStoredTrack, round, trackInit } from "./payloads.js";
import {
  benchSource,
  cpuMs,
  ONE_SOURCE_QUOTAS,
  startApi,
  startEmptyGrpc,
  stopProcess,
} from "./procs/processes.js";
import { type Figure, printIfMain } from "./table.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 20_000);
const BATCH = 100;
/** Batches in flight at once (a few clients' worth). */
const BATCHES_IN_FLIGHT = 8;
/** Unary calls in flight at once. */
const UNARY_IN_FLIGHT = 256;
/** Raw JetStream publishes in flight at once. */
const JS_IN_FLIGHT = 1_000;

type Ingest = IngestClient;

const batchOf = (b: number, tag: string) => ({
  calls: Array.from({ length: BATCH }, (_, k) => ({
    call: { case: "track" as const, value: trackInit(b * BATCH + k, tag) },
  })),
});

/** A batch of the same calls, encoded as hookpost/client encodes them (one frame per call). */
const framesOf = (b: number, tag: string) =>
  batchRequestOf(
    Array.from({ length: BATCH }, (_, k) =>
      encodeFrame("track", trackInit(b * BATCH + k, tag), MAX_CALL_BYTES),
    ),
  );

/** calls/s through Batch: CALLS calls in batches of 100, 8 batches in flight. */
async function viaBatch(client: Ingest, tag: string, calls = CALLS): Promise<number> {
  const batches = Math.ceil(calls / BATCH);
  const rate = await pipelined(batches, BATCHES_IN_FLIGHT, (b) => client.batch(batchOf(b, tag)));
  return rate * BATCH;
}

/** As viaBatch, the requests encoded as hookpost/client does. */
async function viaFrames(client: Ingest, tag: string, calls = CALLS): Promise<number> {
  const batches = Math.ceil(calls / BATCH);
  const rate = await pipelined(batches, BATCHES_IN_FLIGHT, (b) => client.batch(framesOf(b, tag)));
  return rate * BATCH;
}

/** calls/s through the HTTP API: the same calls as JSON `/v1/batch` bodies, 8 in flight. */
async function viaHttp(pool: Pool, authorization: string, tag: string, calls = CALLS): Promise<number> {
  const batches = Math.ceil(calls / BATCH);
  const rate = await pipelined(batches, BATCHES_IN_FLIGHT, async (b) => {
    const batch = Array.from({ length: BATCH }, (_, k) => ({
      type: "track",
      ...trackInit(b * BATCH + k, tag),
    }));
    const r = await pool.request({
      path: "/v1/batch",
      method: "POST",
      headers: { "content-type": "application/json", authorization },
      body: JSON.stringify({ batch }),
    });
    await r.body.dump();
    if (r.statusCode !== 200) throw new Error(`HTTP ingest answered ${r.statusCode}`);
  });
  return rate * BATCH;
}

async function viaUnary(client: Ingest, tag: string, calls = CALLS): Promise<number> {
  return pipelined(calls, UNARY_IN_FLIGHT, (i) => client.track(trackInit(i, tag)));
}

/** Messages/s of one client stream of 100-id chunks. */
async function viaStream(client: Ingest, messages = CALLS / 2): Promise<number> {
  const ids = Array.from({ length: BATCH }, (_, i) => `usr_${i.toString(16).padStart(8, "0")}`);
  const started = performance.now();
  await client.syncAudience(
    (function* () {
      for (let i = 0; i < messages; i++) yield { audienceName: i === 0 ? "bench" : "", userIds: ids };
    })(),
  );
  return messages / ((performance.now() - started) / 1000);
}

/**
 * `perf` (issue 25's table, bench/perf.ts): only raw JetStream publish, `Batch` in SDK frames and
 * HTTP `/v1/batch`, each against the raw publish (target 0.9x).
 */
export async function benchIngest(params: string[] = []): Promise<Figure[]> {
  const perf = params.includes("perf");
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url, noAsyncTraces: true });
  const empty = await startEmptyGrpc();
  // No dispatcher drains EVENTS here, and one source sends everything.
  const ingest = startApi(server.url, ONE_SOURCE_QUOTAS);
  const clients: Array<{ close(): void }> = [];
  try {
    await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
    const { grpc: address, http: httpAddress, admin, sourceId, writeKey } = await benchSource(ingest);
    clients.push(admin);
    const hookpost = ingestClient(address, writeKey);
    const raw = ingestClient(empty.address, writeKey);
    clients.push(hookpost, raw);
    const http = new Pool(`http://${httpAddress}`, { connections: BATCHES_IN_FLIGHT });
    clients.push({ close: () => void http.close() });
    const authorization = `Basic ${Buffer.from(`${writeKey}:`).toString("base64")}`;

    // Raw JetStream: what ingest stores for these calls, with the same dedup header.
    const js = nc.jetstream();
    const rawPublish = async (tag: string, count: number) =>
      pipelined(count, JS_IN_FLIGHT, (i) => publishStoredTrack(js, i, tag, sourceId));

    // Warm-up of every path (JIT, connections, consumers), then the measured runs.
    const step = <T>(what: string, fn: () => Promise<T>) => {
      console.error(`  ingest: ${what}`);
      return fn();
    };
    if (perf) {
      await step("warm-up", async () => {
        await rawPublish("warm-js", 2_000);
        await viaFrames(hookpost, "warm-f", 2_000);
        await viaHttp(http, authorization, "warm-h", 2_000);
      });
      const js = await step("raw JetStream publish", () => rawPublish("js", CALLS));
      const frames = await step("Hookpost Batch, SDK frames", () => viaFrames(hookpost, "f"));
      const api = await step("Hookpost HTTP /v1/batch", () => viaHttp(http, authorization, "h"));
      const limit = { name: "raw JetStream async publish (target 0.9x)", value: js };
      return [
        { name: "limit: raw JetStream async publish", value: Math.round(js), unit: "msg/s" },
        { name: "ingest via gRPC Batch, SDK frames", value: Math.round(frames), unit: "calls/s", limit },
        { name: "ingest via HTTP /v1/batch", value: Math.round(api), unit: "calls/s", limit },
      ];
    }
    await step("warm-up", async () => {
      await rawPublish("warm-js", 2_000);
      await viaBatch(raw, "warm-raw", 2_000);
      await viaFrames(raw, "warm-raw-f", 2_000);
      await viaUnary(raw, "warm-raw", 2_000);
      await viaBatch(hookpost, "warm-b", 2_000);
      await viaUnary(hookpost, "warm-u", 2_000);
      await viaFrames(hookpost, "warm-f", 2_000);
      await viaHttp(http, authorization, "warm-h", 2_000);
    });
    const jsRate = await step("raw JetStream publish", () => rawPublish("js", CALLS));
    const grpcBatch = await step("raw gRPC Batch", () => viaBatch(raw, "raw-b"));
    const grpcFrames = await step("raw gRPC Batch, SDK frames", () => viaFrames(raw, "raw-f"));
    const grpcUnary = await step("raw gRPC unary", () => viaUnary(raw, "raw-u"));
    const grpcStream = await step("raw gRPC stream", () => viaStream(raw));
    // The ingest process's CPU per call: steadier than rates on a machine shared with other work.
    const perCall = async (fn: () => Promise<number>): Promise<[number, string]> => {
      const cpu0 = cpuMs(ingest.proc.pid);
      const rate = await fn();
      return [rate, `ingest CPU ${round(((cpuMs(ingest.proc.pid) - cpu0) * 1000) / CALLS, 1)} µs/call`];
    };
    const [batch, batchCpu] = await step("Hookpost Batch", () => perCall(() => viaBatch(hookpost, "b")));
    const [unary, unaryCpu] = await step("Hookpost unary", () => perCall(() => viaUnary(hookpost, "u")));
    const [frames, framesCpu] = await step("Hookpost Batch, SDK frames", () =>
      perCall(() => viaFrames(hookpost, "f")),
    );
    const [viaApi, apiCpu] = await step("Hookpost HTTP /v1/batch", () =>
      perCall(() => viaHttp(http, authorization, "h")),
    );

    const calls = `${CALLS} track calls of ~300 B`;
    const limitJs = "raw JetStream async publish";
    return [
      {
        name: "limit: raw JetStream async publish",
        value: Math.round(jsRate),
        unit: "msg/s",
        note: `${calls}, ${JS_IN_FLIGHT} in flight`,
      },
      {
        name: "limit: raw gRPC Batch, empty handler",
        value: Math.round(grpcBatch),
        unit: "calls/s",
        note: `batches of ${BATCH}, ${BATCHES_IN_FLIGHT} in flight`,
      },
      {
        name: "limit: raw gRPC Batch, empty handler, SDK frames",
        value: Math.round(grpcFrames),
        unit: "calls/s",
        note: "the same batches encoded as hookpost/client does",
      },
      {
        name: "limit: raw gRPC unary, empty handler",
        value: Math.round(grpcUnary),
        unit: "calls/s",
        note: `${UNARY_IN_FLIGHT} in flight`,
      },
      {
        name: "limit: raw gRPC client stream, empty handler",
        value: Math.round(grpcStream),
        unit: "msg/s",
        note: `${BATCH} ids per message`,
      },
      {
        name: "ingest via Batch",
        value: Math.round(batch),
        unit: "calls/s",
        limit: { name: limitJs, value: jsRate },
        note: `${calls}; answered after every PubAck; ${batchCpu}`,
      },
      {
        name: "ingest via Batch vs gRPC",
        value: Math.round(batch),
        unit: "calls/s",
        limit: { name: "raw gRPC Batch", value: grpcBatch },
      },
      {
        name: "ingest via Batch, SDK frames",
        value: Math.round(frames),
        unit: "calls/s",
        limit: { name: limitJs, value: jsRate },
        note: `encoded as hookpost/client does; ${framesCpu}`,
      },
      {
        name: "ingest via HTTP /v1/batch",
        value: Math.round(viaApi),
        unit: "calls/s",
        limit: { name: limitJs, value: jsRate },
        note: `Segment-compatible JSON, the same calls, ${BATCHES_IN_FLIGHT} in flight; ${apiCpu}`,
      },
      {
        name: "ingest via unary calls",
        value: Math.round(unary),
        unit: "calls/s",
        limit: { name: "raw gRPC unary", value: grpcUnary },
        note: `${UNARY_IN_FLIGHT} in flight; ${unaryCpu}`,
      },
      {
        name: "ingest via unary calls vs JetStream",
        value: Math.round(unary),
        unit: "calls/s",
        limit: { name: limitJs, value: jsRate },
      },
    ].map((f) => ({ ...f, value: round(f.value) }));
  } finally {
    for (const c of clients) c.close();
    await stopProcess(ingest.proc);
    await stopProcess(empty.proc);
    await nc.close();
    await server.stop();
  }
}

await printIfMain(import.meta.url, () => benchIngest(process.argv.slice(2)), true);
