/**
 * Scale benchmark (issue 24): what many destinations cost one 2-core node. Sources with one
 * destination each, every part in its own process (nats-server, api, one dispatcher, the
 * receiver). For each size N (default 1 000 and 10 000):
 *
 * - N sources and N destinations are written straight to the configuration bucket through
 *   ConfigStore (1 000 writes in flight) before the services start: the admin API would add
 *   a gRPC round trip and an id check per record and measure nothing this bench is about;
 * - idle: once the dispatcher is ready (/readyz 200, configuration revision applied), WARM_CALLS
 *   calls went to a warm-up destination of their own and a settling pause is over, the CPU of nats-server, dispatcher and api over IDLE_SECONDS (from
 *   /proc/<pid>/stat) as % of one core, and their RSS (VmRSS);
 * - fan-out: one call to each destination (HTTP `POST /v1/track` with its source's write key)
 *   at FANOUT_RATE calls/s; latency from acceptance (the api answered 200) to receipt,
 *   p50/p99/max, duplicates (same Idempotency-Key twice) and calls never delivered;
 * - under load: halfway through the fan-out a source and a destination are created through the
 *   admin API (gRPC), then one call is sent to it: time from the create's answer to its receipt;
 * - JetStream consumers on HOOKPOST_DELIVERIES (and in the account) idle and after the fan-out,
 *   and the peak RSS (VmHWM) of nats-server and the dispatcher over the whole run.
 *
 *   npm run bench -- scale                 # 1 000 and 10 000 destinations
 *   npm run bench -- scale 100000          # one or more sizes
 *   BENCH_SCALE_IDLE_SECONDS=10 npm run bench -- scale 1000
 *   BENCH_SCALE_FANOUT=5000 npm run bench -- scale 100000   # fan-out to 5 000 of them only
 *
 * Production defaults everywhere (PULL_EXPIRES 5 s, WEBHOOK_TIMEOUT 5 s, ...): idle cost is the
 * point. Each figure is printed beside its target where the issue sets one.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  type ConfigStore,
  DELIVERIES_STREAM,
  type DestinationRecord,
  generateWriteKey,
  hashWriteKey,
  writeKeyPrefix,
} from "@hookpost/core";
import { connect, type JetStreamManager } from "nats";
import { Pool } from "undici";
import { NatsServer } from "../test/helpers/nats-server.js";
import type { ServiceProcess } from "../test/helpers/service-process.js";
import { adminClient } from "../test/helpers/stack.js";
import { percentile, pipelined, round, trackInit } from "./payloads.js";
import {
  cpuMs,
  memoryMiB,
  ReceiverProcess,
  startApi,
  startService,
  stopProcess,
  waitReady,
} from "./procs/processes.js";
import { type Figure, printIfMain } from "./table.js";
import { defaultTopologyStore } from "./topology.js";

const DEFAULT_SIZES = [1_000, 10_000];
const FANOUT_RATE = 1_000;
const IDLE_SECONDS = Number(process.env.BENCH_SCALE_IDLE_SECONDS ?? 20);
/** After readiness: start-up work (JIT, GC of the initial load, consumer creation) dies down. */
const SETTLE_SECONDS = 10;
const WRITES_IN_FLIGHT = 1_000;
/** BENCH_SCALE_FANOUT: at most this many destinations get a call (all of them by default). */
const FANOUT_LIMIT = Number(process.env.BENCH_SCALE_FANOUT ?? Number.POSITIVE_INFINITY);
/** Calls to a warm-up destination before anything is measured. */
const WARM_CALLS = 500;
const TARGET = {
  idleCpuPct: 5,
  rssMiB: 512,
  p99Ms: 2_000,
  newDestinationMs: 2_000,
};

const now = () => performance.timeOrigin + performance.now();

/** N sources with one destination each (receiver path per destination); the write keys. */
async function writeConfiguration(store: ConfigStore, n: number, receiverUrl: string) {
  const keys: string[] = new Array(n);
  const at = new Date().toISOString();
  // The warm-up source and destination (not counted): JIT and connections before the figures;
  // first, so that a core which sets destinations up one by one has it early.
  const warmKey = generateWriteKey();
  await store.putSource({
    id: "src_scale_warm",
    name: "scale warm-up",
    writeKeyHash: hashWriteKey(warmKey),
    writeKeyPrefix: writeKeyPrefix(warmKey),
    createdAt: at,
  });
  await store.putDestination({
    id: "dst_scale_warm",
    name: "scale warm-up",
    sourceIds: ["src_scale_warm"],
    urls: [`${receiverUrl}/dst_scale_warm`],
    headers: {},
    signing: "segment",
    enabled: true,
    createdAt: at,
    updatedAt: at,
  });
  let revision = 0;
  const started = now();
  await pipelined(n, WRITES_IN_FLIGHT, async (i) => {
    const key = generateWriteKey();
    keys[i] = key;
    const sourceId = `src_scale_${i}`;
    await store.putSource({
      id: sourceId,
      name: `scale ${i}`,
      writeKeyHash: hashWriteKey(key),
      writeKeyPrefix: writeKeyPrefix(key),
      createdAt: at,
    });
    const d: DestinationRecord = {
      id: `dst_scale_${i}`,
      name: `scale ${i}`,
      sourceIds: [sourceId],
      urls: [`${receiverUrl}/dst_scale_${i}`],
      headers: {},
      sharedSecret: "bench-secret",
      signing: "segment",
      enabled: true,
      createdAt: at,
      updatedAt: at,
    };
    revision = Math.max(revision, await store.putDestination(d));
  });
  const seconds = (now() - started) / 1000;
  return { keys, warmKey, revision, seconds };
}

async function consumerCounts(jsm: JetStreamManager): Promise<{ deliveries: number; account: number }> {
  const [info, account] = await Promise.all([jsm.streams.info(DELIVERIES_STREAM), jsm.getAccountInfo()]);
  return { deliveries: info.state.consumer_count, account: account.consumers };
}

/** One stack per size, so one size's leftovers (consumers, garbage, sockets) cannot touch the next. */
async function runSize(n: number): Promise<Figure[]> {
  const label = n.toLocaleString("en-US");
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url, noAsyncTraces: true });
  const receiver = await ReceiverProcess.start();
  const services: ServiceProcess[] = [];
  const closers: Array<{ close(): unknown }> = [];
  try {
    const store = await defaultTopologyStore(nc);
    const jsm = await nc.jetstreamManager();
    closers.push(store);
    console.error(`scale ${label}: writing ${label} sources and destinations…`);
    const config = await writeConfiguration(store, n, receiver.url);

    const started = now();
    const api = startApi(server.url);
    services.push(api);
    const dispatcher = startService("dispatcher", {
      NATS_URL: server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "127.0.0.1:0",
    });
    services.push(dispatcher);
    const listening = await api.waitFor("ingest listening", 600_000);
    const dStarted = await dispatcher.waitFor("dispatcher started", 600_000);
    const readyTimeoutMs = Math.min(600_000, Math.max(120_000, n * 20));
    const notReady = await waitReady(String(dStarted.ops), config.revision, readyTimeoutMs);
    const startup = (now() - started) / 1000;
    console.error(
      `scale ${label}: ready after ${round(startup, 1)} s; warm-up, settling, then ${IDLE_SECONDS} s idle…`,
    );
    const http = new Pool(`http://${String(listening.http)}`, { connections: 32, pipelining: 1 });
    // The call to the destination created under load goes on a connection of its own, as its
    // owner's client would: never queued in this bench's own pool behind the fan-out's requests.
    const own = new Pool(`http://${String(listening.http)}`, { connections: 1 });
    closers.push({ close: () => http.close() }, { close: () => own.close() });
    const track = async (writeKey: string, messageId: string, i: number, via = http): Promise<number> => {
      const r = await via.request({
        path: "/v1/track",
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Basic ${Buffer.from(`${writeKey}:`).toString("base64")}`,
        },
        body: JSON.stringify({ ...trackInit(i, "scale"), messageId }),
      });
      await r.body.dump();
      if (r.statusCode !== 200) throw new Error(`api answered ${r.statusCode} to /v1/track`);
      return now();
    };
    await pipelined(WARM_CALLS, 32, (i) => track(config.warmKey, `warm-${i}`, i));
    // A stack still setting destinations up may not deliver it yet: measured anyway, and said.
    const warmMissing = await receiver.waitForTagCount("warm", WARM_CALLS, 120_000).then(
      () => undefined,
      (err: Error) => err.message,
    );
    await sleep(SETTLE_SECONDS * 1000);

    // Idle: nothing is sent; what the stack costs just for having N destinations.
    const pids = [server.pid, dispatcher.proc.pid, api.proc.pid];
    const before = pids.map(cpuMs);
    const idleFrom = now();
    await sleep(IDLE_SECONDS * 1000);
    const idleMs = now() - idleFrom;
    const [natsCpu, dispatcherCpu, apiCpu] = pids.map((pid, i) => ((cpuMs(pid) - before[i]!) / idleMs) * 100);
    const [natsRss, dispatcherRss, apiRss] = pids.map((pid) => memoryMiB(pid));
    const idleConsumers = await consumerCounts(jsm);

    // Fan-out: one call per destination through the api, at a steady rate (to FANOUT_LIMIT
    // destinations spread over all N, when set).
    const fan = Math.min(n, FANOUT_LIMIT);
    const pick = (k: number) => Math.floor((k * n) / fan);
    console.error(`scale ${label}: one call to each of ${fan} destinations at ${FANOUT_RATE} calls/s…`);
    const admin = adminClient(String(listening.address));
    closers.push(admin);
    const tag = `scale${n}`;
    const accepted: number[] = new Array(fan);
    const answerMs: number[] = new Array(fan);
    let underLoad: Promise<number> | undefined;
    const fanFrom = now();
    const fanCpuBefore = pids.map(cpuMs);
    const sends = await paced(fan, (i) => {
      const sent = now();
      if (i === Math.floor(fan / 2))
        underLoad = newDestinationUnderLoad(admin, receiver, (key, id, k) => track(key, id, k, own));
      return track(config.keys[pick(i)]!, `${tag}-${i}`, i).then((at) => {
        accepted[i] = at;
        answerMs[i] = at - sent;
      });
    });
    const offeredSeconds = (now() - fanFrom) / 1000;
    await Promise.all(sends);
    const sendSeconds = (now() - fanFrom) / 1000;
    // Routing may cost more per call with more destinations: allow ~1 µs per call and destination.
    const timeoutMs = Math.max(120_000, fan * 3, (fan * n) / 1000);
    const missingError = await receiver.waitForTagCount(tag, fan, timeoutMs).then(
      () => undefined,
      (err: Error) => err.message,
    );
    const fanCpu = pids.map((pid, i) => ((cpuMs(pid) - fanCpuBefore[i]!) * 1000) / fan);
    const newDestinationMs = await underLoad!;
    // Late duplicates (a redelivery after an ack that got lost) would come within ACK_WAIT; the
    // receipts so far tell most of it, a short wait catches the quick ones.
    await sleep(2_000);
    const latencies: number[] = [];
    for (let i = 0; i < fan; i++) {
      const at = receiver.arrivals.get(`${tag}-${i}`);
      if (at !== undefined) latencies.push(at - accepted[i]!);
    }
    // The fan-out above is every destination's first call ever (its metrics, health and
    // capacity entries made then); a second one shows a node whose destinations are in use.
    console.error(`scale ${label}: a second call to each of ${fan} destinations…`);
    const again = await (async () => {
      const at: number[] = new Array(fan);
      const cpuBefore = pids.map(cpuMs);
      await Promise.all(
        await paced(fan, (i) => track(config.keys[pick(i)]!, `${tag}again-${i}`, i).then((t) => (at[i] = t))),
      );
      await receiver.waitForTagCount(`${tag}again`, fan, timeoutMs).catch(() => {});
      const cpu = pids.map((pid, i) => ((cpuMs(pid) - cpuBefore[i]!) * 1000) / fan);
      const lat: number[] = [];
      for (let i = 0; i < fan; i++) {
        const got = receiver.arrivals.get(`${tag}again-${i}`);
        if (got !== undefined) lat.push(got - at[i]!);
      }
      return { lat, cpu, missing: fan - lat.length };
    })();
    await sleep(2_000);
    // Over both fan-outs (and the warm-up and the destination created under load).
    const duplicates = receiver.requests - receiver.arrivals.size;
    const busyConsumers = await consumerCounts(jsm);
    const [natsPeak, dispatcherPeak] = [server.pid, dispatcher.proc.pid].map((pid) =>
      memoryMiB(pid, "VmHWM"),
    );

    const name = (what: string) => `${label} destinations: ${what}`;
    return [
      {
        name: name("configuration written"),
        value: round(config.seconds, 1),
        unit: "s",
        note: `${label} sources + ${label} destinations via ConfigStore, ${WRITES_IN_FLIGHT} in flight`,
      },
      {
        name: name("start-up until ready"),
        value: round(startup, 1),
        unit: "s",
        note: notReady
          ? `NOT READY after ${readyTimeoutMs / 1000} s, measured anyway; /readyz said ${notReady}${warmMissing ? `; warm-up: ${warmMissing} in 120 s` : ""}`
          : `api and dispatcher started -> dispatcher /readyz 200 with the configuration applied${warmMissing ? `; warm-up: ${warmMissing} in 120 s` : ""}`,
      },
      {
        name: name("idle CPU, whole stack"),
        value: round(natsCpu! + dispatcherCpu! + apiCpu!, 1),
        unit: "% of a core",
        limit: { name: "target", value: TARGET.idleCpuPct },
        note: `nats-server ${round(natsCpu!, 1)} + dispatcher ${round(dispatcherCpu!, 1)} + api ${round(apiCpu!, 1)} %, over ${IDLE_SECONDS} s after ${SETTLE_SECONDS} s settling`,
      },
      {
        name: name("RSS nats-server + dispatcher, idle"),
        value: Math.round(natsRss! + dispatcherRss!),
        unit: "MiB",
        limit: { name: "target", value: TARGET.rssMiB },
        note: `nats-server ${Math.round(natsRss!)} + dispatcher ${Math.round(dispatcherRss!)} MiB (api ${Math.round(apiRss!)} MiB)`,
      },
      {
        name: name("peak RSS nats-server + dispatcher"),
        value: Math.round(natsPeak! + dispatcherPeak!),
        unit: "MiB",
        limit: { name: "target", value: TARGET.rssMiB },
        note: `VmHWM over the whole run: nats-server ${Math.round(natsPeak!)} + dispatcher ${Math.round(dispatcherPeak!)} MiB`,
      },
      {
        name: name("fan-out latency p50"),
        value: Math.round(percentile(latencies, 50)),
        unit: "ms",
        note: `one call to each ${fan === n ? "" : `of ${fan} (BENCH_SCALE_FANOUT) `}destination over HTTP /v1/track, offered at ${Math.round(fan / offeredSeconds)} calls/s, all accepted after ${round(sendSeconds, 1)} s (api answer p99 ${Math.round(percentile(answerMs, 99))} ms); accepted -> receipt`,
      },
      {
        name: name("fan-out latency p99"),
        value: Math.round(percentile(latencies, 99)),
        unit: "ms",
        limit: { name: "target", value: TARGET.p99Ms },
        note: `max ${Math.round(percentile(latencies, 100))} ms`,
      },
      {
        // Where the fan-out's CPU went: the process that saturates first sets the latency.
        name: name("fan-out CPU per call, whole stack"),
        value: Math.round(fanCpu.reduce((a, b) => a + b, 0)),
        unit: "µs",
        note: `nats-server ${Math.round(fanCpu[0]!)} + dispatcher ${Math.round(fanCpu[1]!)} + api ${Math.round(fanCpu[2]!)} µs, from the first call sent to the last receipt`,
      },
      {
        name: name("second fan-out latency p50"),
        value: Math.round(percentile(again.lat, 50)),
        unit: "ms",
        note: `one more call to each destination, same rate; ${again.missing} never delivered`,
      },
      {
        name: name("second fan-out latency p99"),
        value: Math.round(percentile(again.lat, 99)),
        unit: "ms",
        limit: { name: "target", value: TARGET.p99Ms },
        note: `max ${Math.round(percentile(again.lat, 100))} ms; CPU per call nats-server ${Math.round(again.cpu[0]!)} + dispatcher ${Math.round(again.cpu[1]!)} + api ${Math.round(again.cpu[2]!)} µs`,
      },
      {
        name: name("fan-out calls never delivered"),
        value: fan - latencies.length,
        unit: "calls",
        note: missingError ? `after ${timeoutMs / 1000} s: ${missingError}` : "target 0",
      },
      {
        name: name("duplicates"),
        value: duplicates,
        unit: "deliveries",
        note: "same Idempotency-Key received twice; target 0",
      },
      {
        name: name("destination created under load: first call after"),
        value: Math.round(newDestinationMs),
        unit: "ms",
        limit: { name: "target", value: TARGET.newDestinationMs },
        note: "admin CreateSource + CreateDestination halfway through the fan-out, then one call; create answered -> receipt",
      },
      {
        name: name("JetStream consumers on HOOKPOST_DELIVERIES"),
        value: idleConsumers.deliveries,
        unit: "consumers",
        note: `idle; after the fan-out ${busyConsumers.deliveries}; whole account ${idleConsumers.account} idle, ${busyConsumers.account} after`,
      },
    ];
  } finally {
    for (const c of closers) await c.close();
    await Promise.all(services.map((s) => stopProcess(s.proc)));
    await receiver.stop();
    await nc.close();
    await server.stop();
  }
}

/**
 * Creates a source and a destination through the admin API while the fan-out runs, then sends
 * one call to it; ms from the create's answer to that call's receipt (NaN: never arrived in 300 s).
 */
/** Starts `send(0..count-1)` at FANOUT_RATE calls/s, whatever the answers; their promises. */
async function paced(count: number, send: (i: number) => Promise<unknown>): Promise<Promise<unknown>[]> {
  const from = now();
  const sends: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const wait = from + (i * 1000) / FANOUT_RATE - now();
    if (wait > 1) await sleep(wait);
    sends.push(send(i));
  }
  return sends;
}

async function newDestinationUnderLoad(
  admin: ReturnType<typeof adminClient>,
  receiver: ReceiverProcess,
  track: (writeKey: string, messageId: string, i: number) => Promise<number>,
): Promise<number> {
  const source = await admin.createSource({ name: "created under load" });
  await admin.createDestination({
    destination: {
      name: "created under load",
      urls: [`${receiver.url}/under-load`],
      sourceIds: [source.source!.id],
      enabled: true,
    },
  });
  const created = now();
  await track(source.writeKey, "underload-0", 0);
  try {
    await receiver.waitForTag("underload", 1, 300_000);
  } catch {
    return Number.NaN;
  }
  return receiver.arrivals.get("underload-0")! - created;
}

export async function benchScale(args: string[] = []): Promise<Figure[]> {
  const sizes = args.length > 0 ? args.map(Number) : DEFAULT_SIZES;
  const bad = sizes.find((s) => !Number.isInteger(s) || s < 1);
  if (bad !== undefined) throw new Error(`scale: sizes are destination counts, got "${bad}"`);
  const figures: Figure[] = [];
  for (const n of sizes) {
    // One size failing (a stack that cannot cope) still leaves the other sizes' figures.
    const got = await runSize(n).catch((err: Error): Figure[] => {
      console.error(err);
      return [
        { name: `${n.toLocaleString("en-US")} destinations`, value: "failed", unit: "", note: err.message },
      ];
    });
    figures.push(...got);
  }
  // NaN (nothing arrived to measure) would cross the suite's JSON as null: say it in words.
  for (const f of figures) if (typeof f.value === "number" && !Number.isFinite(f.value)) f.value = "none";
  return figures;
}

await printIfMain(import.meta.url, () => benchScale(process.argv.slice(2)), true);
