/**
 * Isolation benchmark (issue 3): a healthy destination's delivery latency p99 (receive time -
 * publish time) alone and beside a destination that always times out. Throughput and latency
 * against the machine's limits are in dispatcher.ts.
 *
 *   npm run bench -- isolation
 *
 * Starts a private nats-server; replicas run as child processes (`services/dispatcher/main.ts`),
 * as in production, so two replicas really are two event loops. Calls are published to EVENTS the
 * way ingest does. The receiver (node:http, answers 200 at once) runs in this process.
 *
 * Then the hung-endpoints run (issue 24), on a fresh nats-server and one dispatcher with the
 * production defaults (WEBHOOK_TIMEOUT 5 s, DELIVERY_MAX_CONNECTIONS 512): HUNG_DESTINATIONS
 * destinations of one source, each its own origin that accepts connections and never answers
 * (procs/hung-child.ts), get HUNG_CALLS calls each; meanwhile one healthy destination (receiver
 * in its own process) gets HEALTHY_RATE calls/s for HEALTHY_SECONDS. Figures: the healthy one's
 * p50/p99 (publish -> receipt), the most connections the hung endpoints held open at once
 * (server side, exact) and the dispatcher's open file descriptors above its idle count (sampled
 * every 100 ms) beside DELIVERY_MAX_CONNECTIONS, duplicates of the healthy destination, and
 * where the hung calls are at the end: still queued, dead-lettered (the bench does not wait for
 * the retry window).
 *
 * The hung calls are published at once before the healthy ones (a burst of 20 000 deliveries);
 * BENCH_HUNG_SPREAD=1 publishes them one by one over the healthy run instead.
 *
 *   BENCH_HUNG_DESTINATIONS=100 npm run bench -- isolation
 *   BENCH_HUNG_SPREAD=1 npm run bench -- isolation
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { StoredCall } from "@hookpost/contract";
import type { DestinationRecord } from "@hookpost/core";
import {
  DEAD_STREAM,
  DELIVERIES_STREAM,
  EVENTS_STREAM,
  eventSubject,
  partitionConsumer,
  ROUTER_CONSUMER,
} from "@hookpost/core";
import { connect, type JetStreamClient, type NatsConnection } from "nats";
import { NatsServer } from "../test/helpers/nats-server.js";
import { percentile, pipelined, round } from "./payloads.js";
import {
  HungEndpoints,
  openFds,
  ReceiverProcess,
  serviceArgs,
  startService,
  stopProcess,
  waitReady,
} from "./procs/processes.js";
import { type Figure, printIfMain } from "./table.js";
import { defaultTopologyStore } from "./topology.js";

const STEADY_RATE = 200; // calls/s for the latency figures
const STEADY_SECONDS = 3;
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const HUNG_DESTINATIONS = Number(process.env.BENCH_HUNG_DESTINATIONS ?? 1_000);
const HUNG_CALLS = 20;
const HEALTHY_RATE = 50;
/** BENCH_HUNG_SPREAD=1: the hung calls come one by one during the healthy run, not in one burst. */
const HUNG_SPREAD = process.env.BENCH_HUNG_SPREAD === "1";
const HEALTHY_SECONDS = 30;
const TRACE = process.env.BENCH_TRACE === "1";
/** DELIVERY_MAX_CONNECTIONS' default: the cap the hung run compares its sockets with. */
const MAX_CONNECTIONS = 512;
const HEALTHY_P99_TARGET_MS = 2_000;
/** How long the healthy calls may still arrive after the last one was published. */
const STEADY_WAIT_MS = 60_000;

/** Counts requests by Idempotency-Key and when they arrived. */
class Sink {
  readonly arrivals = new Map<string, number>();
  requests = 0;
  hang = false;
  readonly server: Server;
  constructor() {
    this.server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        this.requests++;
        if (this.hang) return;
        const id = String(req.headers["idempotency-key"]);
        if (!this.arrivals.has(id)) this.arrivals.set(id, Date.now());
        res.writeHead(200).end();
      });
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", () => resolve()));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  async waitFor(ids: Iterable<string>, timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const id of ids) {
      while (!this.arrivals.has(id)) {
        if (Date.now() > deadline) throw new Error(`only ${this.arrivals.size} deliveries arrived`);
        await sleep(5);
      }
    }
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function replica(natsUrl: string, env: Record<string, string> = {}): ChildProcess {
  const proc = spawn(process.execPath, serviceArgs("dispatcher"), {
    cwd: ROOT,
    env: {
      ...process.env,
      NATS_URL: natsUrl,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "off",
      LOG_LEVEL: "error",
      PULL_EXPIRES: "1s",
      ...env,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  // Each measurement starts with a warm-up run that waits until deliveries arrive.
  return proc;
}

async function stopReplicas(procs: ChildProcess[]): Promise<void> {
  await Promise.all(
    procs.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.exitCode !== null) return resolve();
          p.once("exit", () => resolve());
          p.kill("SIGTERM");
        }),
    ),
  );
}

let seq = 0;
function call(sourceId: string): StoredCall {
  const now = new Date().toISOString();
  return {
    type: "track",
    messageId: `bench-${process.pid}-${++seq}`,
    sourceId,
    receivedAt: now,
    timestamp: now,
    userId: `user-${seq % 1000}`,
    event: "Order Completed",
    properties: { orderId: seq, total: 42.5, currency: "EUR", items: [{ sku: "A-1", qty: 2 }] },
    context: { ip: "203.0.113.7", library: { name: "bench", version: "1" } },
  };
}

async function publish(js: JetStreamClient, c: StoredCall): Promise<void> {
  await js.publish(eventSubject(c.sourceId, c.type), JSON.stringify(c), { msgID: c.messageId });
}

function destination(id: string, sourceId: string, url: string): DestinationRecord {
  const now = new Date().toISOString();
  return {
    id,
    name: id,
    sourceIds: [sourceId],
    urls: [url],
    headers: {},
    sharedSecret: "bench-secret",
    signing: "segment",
    enabled: true,
    createdAt: now,
    updatedAt: now,
  };
}

/** Publishes at a steady rate; returns latencies (ms) from publish to receipt. */
async function latencies(js: JetStreamClient, sink: Sink, sourceId: string, rate: number, seconds: number) {
  const sent = new Map<string, number>();
  const interval = 1000 / rate;
  const start = Date.now();
  for (let i = 0; i < rate * seconds; i++) {
    const wait = start + i * interval - Date.now();
    if (wait > 0) await sleep(wait);
    const c = call(sourceId);
    sent.set(c.messageId, Date.now());
    void publish(js, c);
  }
  await sink.waitFor(sent.keys());
  return [...sent].map(([id, at]) => sink.arrivals.get(id)! - at);
}

export async function benchIsolation(): Promise<Figure[]> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  const figures: Figure[] = [];
  const procs: ChildProcess[] = [];
  const sinks: Sink[] = [];
  try {
    const store = await defaultTopologyStore(nc);
    const js = nc.jetstream();
    const newSink = async () => {
      const s = new Sink();
      sinks.push(s);
      return { sink: s, url: await s.listen() };
    };

    const one = await newSink();
    await store.putDestination(destination("bench1", "src1", one.url));
    // Isolation: the same healthy destination, then beside one that never answers.
    const dead = new Sink();
    sinks.push(dead);
    dead.hang = true;
    const deadUrl = await dead.listen();
    procs.push(replica(server.url, { WEBHOOK_TIMEOUT: "300ms", RETRY_BASE_DELAY: "100ms" }));
    await latencies(js, one.sink, "src1", STEADY_RATE, 1); // warm-up
    const alone = await latencies(js, one.sink, "src1", STEADY_RATE, STEADY_SECONDS);
    await store.putDestination(destination("timeout", "src1", deadUrl));
    await sleep(500);
    const beside = await latencies(js, one.sink, "src1", STEADY_RATE, STEADY_SECONDS);
    figures.push({
      name: "isolation: healthy p99 alone",
      value: percentile(alone, 99),
      unit: "ms",
      note: `${STEADY_RATE} calls/s`,
    });
    figures.push({
      name: "isolation: healthy p99 beside timing-out dest.",
      value: percentile(beside, 99),
      unit: "ms",
      note: `timeout 300 ms, ${dead.requests} attempts on it meanwhile`,
    });
    store.close();
  } finally {
    await stopReplicas(procs);
    await Promise.all(sinks.map((s) => s.close()));
    await nc.close();
    await server.stop();
  }
  figures.push(...(await hungEndpoints()));
  return figures;
}

/**
 * BENCH_TRACE=1: every 2 s, where work waits (the router's backlog on EVENTS, each partition's
 * pending and in-flight count) and how many healthy calls arrived: to find where a
 * healthy call's time goes.
 */
function traceQueues(nc: NatsConnection, healthy: ReceiverProcess, from: number): { stop(): void } {
  let stopped = false;
  const loop = async () => {
    const jsm = await nc.jetstreamManager();
    while (!stopped) {
      const router = await jsm.consumers.info(EVENTS_STREAM, ROUTER_CONSUMER);
      const parts: string[] = [];
      // One consumer info per partition: listing every consumer (a thousand lanes) would cost
      // nats-server more than the run itself.
      for (let p = 0; ; p++) {
        const c = await jsm.consumers.info(DELIVERIES_STREAM, partitionConsumer(p)).catch(() => undefined);
        if (!c) break;
        parts.push(`${c.num_pending}/${c.num_ack_pending}`);
      }
      const healthyIn = [...healthy.arrivals.keys()].filter((k) => k.startsWith("healthy-")).length;
      console.error(
        `t=${round((Date.now() - from) / 1000, 1)}s router pending ${router.num_pending} inflight ${router.num_ack_pending}; partitions pending/inflight ${parts.join(" ")}; healthy in ${healthyIn}`,
      );
      await sleep(2000);
    }
  };
  void loop().catch((err) => console.error("trace stopped:", (err as Error).message));
  return {
    stop: () => {
      stopped = true;
    },
  };
}

/** Messages a stream holds now. */
async function streamMessages(nc: NatsConnection, stream: string): Promise<number> {
  const jsm = await nc.jetstreamManager();
  return (await jsm.streams.info(stream)).state.messages;
}

/** The hung-endpoints run (see the top of this file). */
async function hungEndpoints(): Promise<Figure[]> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url, noAsyncTraces: true });
  const hung = await HungEndpoints.start(HUNG_DESTINATIONS);
  const healthy = await ReceiverProcess.start();
  let dispatcher: ChildProcess | undefined;
  let sampler: NodeJS.Timeout | undefined;
  try {
    const store = await defaultTopologyStore(nc);
    const js = nc.jetstream();
    let revision = await store.putDestination(destination("healthy", "src_healthy", healthy.url));
    await pipelined(HUNG_DESTINATIONS, 500, async (i) => {
      const r = await store.putDestination(destination(`hung_${i}`, "src_hung", hung.urls[i]!));
      revision = Math.max(revision, r);
    });
    store.close();
    const d = startService("dispatcher", {
      NATS_URL: server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "127.0.0.1:0",
      WEBHOOK_TIMEOUT: "5s",
    });
    dispatcher = d.proc;
    const started = await d.waitFor("dispatcher started", 300_000);
    const notReady = await waitReady(String(started.ops), revision, 300_000);
    // Warm-up of the healthy path, then the hung endpoints' calls, then the measured healthy calls.
    await steadyCalls(js, healthy, "src_healthy", "hwarm", 200, 1);
    const idleFds = openFds(dispatcher.pid);
    let peakFds = idleFds;
    // not a wait: samples the dispatcher's sockets while the run goes on
    sampler = setInterval(() => {
      peakFds = Math.max(peakFds, openFds(dispatcher?.pid));
    }, 100);
    const hungFrom = Date.now();
    const trace = TRACE ? traceQueues(nc, healthy, hungFrom) : undefined;
    // Burst: all at once before the healthy calls; spread: one every HEALTHY_SECONDS / HUNG_CALLS.
    const hungCalls = HUNG_SPREAD
      ? (async () => {
          for (let i = 0; i < HUNG_CALLS; i++) {
            await publish(js, call("src_hung"));
            await sleep((HEALTHY_SECONDS * 1000) / HUNG_CALLS);
          }
        })()
      : Promise.all(Array.from({ length: HUNG_CALLS }, () => publish(js, call("src_hung"))));
    if (!HUNG_SPREAD) await hungCalls;
    const { values, missing } = await steadyCalls(
      js,
      healthy,
      "src_healthy",
      "healthy",
      HEALTHY_RATE,
      HEALTHY_SECONDS,
    );
    await hungCalls;
    trace?.stop();
    clearInterval(sampler);
    sampler = undefined;
    const elapsed = round((Date.now() - hungFrom) / 1000, 0);
    const duplicates = healthy.requests - healthy.arrivals.size;
    const [queued, unrouted, dead] = await Promise.all([
      streamMessages(nc, DELIVERIES_STREAM),
      streamMessages(nc, EVENTS_STREAM),
      streamMessages(nc, DEAD_STREAM),
    ]);
    const total = HUNG_DESTINATIONS * HUNG_CALLS;
    const label = `hung: ${HUNG_DESTINATIONS.toLocaleString("en-US")} hung destinations x ${HUNG_CALLS} calls (${HUNG_SPREAD ? `spread over ${HEALTHY_SECONDS} s` : "burst"})`;
    return [
      {
        name: `${label}: healthy p50`,
        value: round(percentile(values, 50), 0),
        unit: "ms",
        note: `${HEALTHY_RATE} calls/s for ${HEALTHY_SECONDS} s to one healthy destination, publish -> receipt; WEBHOOK_TIMEOUT 5 s${notReady ? `; dispatcher NOT READY at the start: ${notReady}` : ""}`,
      },
      {
        name: `${label}: healthy p99`,
        value: round(percentile(values, 99), 0),
        unit: "ms",
        limit: { name: "target", value: HEALTHY_P99_TARGET_MS },
        note: missing
          ? `${missing} of ${values.length} NOT DELIVERED ${STEADY_WAIT_MS / 1000} s after the last publish (counted with their wait so far: a lower bound)`
          : `max ${round(percentile(values, 100), 0)} ms`,
      },
      {
        name: `${label}: peak open connections at the hung endpoints`,
        value: hung.peak,
        unit: "sockets",
        limit: { name: "DELIVERY_MAX_CONNECTIONS default", value: MAX_CONNECTIONS },
        note: `server side, exact; ${hung.accepted} connections accepted (about one per attempt), ${hung.open} still open after ${elapsed} s`,
      },
      {
        name: `${label}: peak dispatcher open files above idle`,
        value: peakFds - idleFds,
        unit: "fds",
        limit: { name: "DELIVERY_MAX_CONNECTIONS default", value: MAX_CONNECTIONS },
        note: `/proc/<pid>/fd sampled every 100 ms (${idleFds} at idle)`,
      },
      {
        name: `${label}: healthy duplicates`,
        value: duplicates,
        unit: "deliveries",
        note: "same Idempotency-Key received twice; target 0",
      },
      {
        name: `${label}: where the hung calls are after ${elapsed} s`,
        value: `${queued} queued`,
        unit: "",
        note: `of ${total} deliveries: ${queued} messages in HOOKPOST_DELIVERIES (healthy ones not yet delivered included), ${dead} dead-lettered, ${unrouted} calls not yet routed (EVENTS); none delivered (the endpoints never answer); not waiting for the retry window`,
      },
    ];
  } finally {
    if (sampler) clearInterval(sampler);
    if (dispatcher) await stopProcess(dispatcher);
    await healthy.stop();
    await hung.stop();
    await nc.close();
    await server.stop();
  }
}

/**
 * Publishes `rate` calls/s for `seconds` to `sourceId` (message ids `<tag>-<i>`); latencies (ms)
 * from publish to the receiver's receipt, and how many had not arrived STEADY_WAIT_MS after the
 * last publish.
 */
async function steadyCalls(
  js: JetStreamClient,
  receiver: ReceiverProcess,
  sourceId: string,
  tag: string,
  rate: number,
  seconds: number,
): Promise<{ values: number[]; missing: number }> {
  const total = rate * seconds;
  const sent: number[] = new Array(total);
  const start = performance.now();
  const publishes: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 1) await sleep(wait);
    const c = { ...call(sourceId), messageId: `${tag}-${i}` };
    sent[i] = performance.timeOrigin + performance.now();
    publishes.push(publish(js, c));
  }
  await Promise.all(publishes);
  const missing = await receiver.waitForTagCount(tag, total, STEADY_WAIT_MS).then(
    () => 0,
    () => total - sent.filter((_, i) => receiver.arrivals.has(`${tag}-${i}`)).length,
  );
  // A call still missing counts with the time it waited so far: its latency is at least that.
  const end = performance.timeOrigin + performance.now();
  return { values: sent.map((at, i) => (receiver.arrivals.get(`${tag}-${i}`) ?? end) - at), missing };
}

await printIfMain(import.meta.url, benchIsolation, true);
