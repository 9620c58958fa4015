/**
 * Dispatcher replicas benchmark (issue 16): the same backlog of deliveries drained by 1, 2 and 4
 * dispatcher replicas; deliveries per second for each.
 *
 *   npx tsx bench/replicas.ts
 *   BENCH_BACKLOG=20000 npx tsx bench/replicas.ts
 *
 * For each count, a fresh destination is created and its backlog is published straight to its
 * DELIVERIES partitions the way the router writes it, then the replicas (child processes,
 * `services/dispatcher/main.ts`) start: from the moment every one of them runs to the last
 * delivery gives the rate (what the first replica delivered before is left out). One
 * nats-server; the receiver answers 200 at once in this process. On a 2-core machine shared with
 * nats-server and the receiver, more replicas cannot add CPU: the figures show the cost of
 * coordination (more pull requests, more acks to one consumer), not a gain.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { DestinationRecord } from "@hookpost/core";
import {
  type ConfigStore,
  MESSAGE_ID_HEADER,
  partitionOf,
  partitionSubject,
  SOURCE_ID_HEADER,
} from "@hookpost/core";
import { renderBody } from "@hookpost/dispatcher";
import { connect, headers } from "nats";
import { NatsServer } from "../test/helpers/nats-server.js";
import { type ServiceProcess, spawnService } from "../test/helpers/service-process.js";
import { type Figure, printIfMain } from "./table.js";
import { defaultTopologyStore } from "./topology.js";

const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 5000);
const COUNTS = [1, 2, 4];
/** DELIVERY_PARTITIONS' default: the router's spread of a destination's calls. */
const PARTITIONS = 8;

/** Counts distinct deliveries (by Idempotency-Key). */
class Sink {
  readonly seen = new Set<string>();
  url = "";
  readonly server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      this.seen.add(String(req.headers["idempotency-key"]));
      res.writeHead(200).end();
    });
  });
  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", () => resolve()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this.url;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function destination(id: string, url: string, enabled: boolean): DestinationRecord {
  const now = new Date().toISOString();
  return {
    id,
    name: id,
    sourceIds: ["bench"],
    urls: [url],
    headers: {},
    sharedSecret: "bench-secret",
    signing: "segment",
    enabled,
    createdAt: now,
    updatedAt: now,
  };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** The backlog, as the router writes it: rendered body, message and source id headers. */
async function publishBacklog(nc: Awaited<ReturnType<typeof connect>>, destId: string): Promise<void> {
  const js = nc.jetstream();
  const now = new Date().toISOString();
  for (let i = 0; i < BACKLOG; i += 250) {
    await Promise.all(
      Array.from({ length: Math.min(250, BACKLOG - i) }, (_, k) => {
        const messageId = `${destId}-${i + k}`;
        const body = renderBody({
          type: "track",
          messageId,
          sourceId: "bench",
          receivedAt: now,
          timestamp: now,
          userId: `user-${(i + k) % 1000}`,
          event: "Order Completed",
          properties: { orderId: i + k, total: 42.5, currency: "EUR" },
        });
        const h = headers();
        h.set(MESSAGE_ID_HEADER, messageId);
        h.set(SOURCE_ID_HEADER, "bench");
        const subject = partitionSubject(partitionOf(messageId, PARTITIONS), destId);
        return js.publish(subject, body, { headers: h, msgID: messageId });
      }),
    );
  }
}

async function drain(
  url: string,
  nc: Awaited<ReturnType<typeof connect>>,
  store: ConfigStore,
  replicas: number,
  sink: Sink,
): Promise<number> {
  const id = `replicas${replicas}`;
  // The backlog waits on the destination's partitions before any replica runs (partition
  // consumers serve every destination: there is no per-destination consumer to wait for).
  await store.putDestination(destination(id, sink.url, true));
  await publishBacklog(nc, id);
  const procs: ServiceProcess[] = Array.from({ length: replicas }, () =>
    spawnService("services/dispatcher/main.ts", {
      NATS_URL: url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "off",
      LOG_LEVEL: "info",
      PULL_EXPIRES: "1s",
    }),
  );
  try {
    // Measured once every replica runs: what the first one delivered meanwhile is left out.
    await Promise.all(procs.map((p) => p.waitFor("dispatcher started", 60_000)));
    const started = Date.now();
    const before = sink.seen.size;
    await until(`${BACKLOG} deliveries`, () => sink.seen.size >= BACKLOG);
    return (BACKLOG - before) / ((Date.now() - started) / 1000);
  } finally {
    for (const p of procs) p.proc.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
  }
}

export async function benchReplicas(): Promise<Figure[]> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  const figures: Figure[] = [];
  const sinks: Sink[] = [];
  try {
    const store = await defaultTopologyStore(nc);
    let first = 0;
    for (const n of COUNTS) {
      const sink = new Sink();
      sinks.push(sink);
      await sink.listen();
      const rate = await drain(server.url, nc, store, n, sink);
      first ||= rate;
      figures.push({
        name: `deliveries/s, ${n} replica${n === 1 ? "" : "s"}, same backlog`,
        value: Math.round(rate),
        unit: "1/s",
        note:
          n === 1
            ? `${BACKLOG} deliveries, signed, 200 at once`
            : `${(rate / first).toFixed(2)}x of 1 replica (on 2 cores: the cost of coordination, not a gain)`,
      });
    }
    store.close();
  } finally {
    await Promise.all(sinks.map((s) => s.close()));
    await nc.close();
    await server.stop();
  }
  return figures;
}

await printIfMain(import.meta.url, benchReplicas);
