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
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { StoredCall } from "@hookpost/contract";
import type { DestinationRecord } from "@hookpost/core";
import { ConfigStore, DEFAULT_TOPOLOGY, ensureTopology, eventSubject } from "@hookpost/core";
import { connect, type JetStreamClient } from "nats";
import { NatsServer } from "../test/helpers/nats-server.js";
import { type Figure, printIfMain } from "./table.js";

const STEADY_RATE = 200; // calls/s for the latency figures
const STEADY_SECONDS = 3;
const ROOT = fileURLToPath(new URL("..", import.meta.url));

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
  const proc = spawn(
    process.execPath,
    ["--conditions=@hookpost/source", "--import", "tsx", "services/dispatcher/main.ts"],
    {
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
    },
  );
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

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
  );
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
    await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
    const js = nc.jetstream();
    const store = await ConfigStore.open(nc);
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
  return figures;
}

await printIfMain(import.meta.url, benchIsolation, true);
