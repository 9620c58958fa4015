/**
 * NATS outage soak (issue 22, finding 9): every destination's delivery rate before and after a
 * nats-server outage, under steady load.
 *
 *   npm run bench -- outage
 *   npx tsx bench/outage.ts
 *   BENCH_OUTAGE_RATE=250 BENCH_OUTAGE_SECONDS=15 BENCH_OUTAGE_COUNT=1 npx tsx bench/outage.ts
 *
 * Two dispatcher replicas (child processes, production defaults: DELIVERY_CONCURRENCY=16,
 * PULL_EXPIRES=5s) deliver every call to three destinations: `slow` (its endpoint takes 50 ms),
 * `healthy` (answers at once) and `flaky` (a 500 for one call in five; retried). Calls are
 * published to EVENTS at a steady rate through the production publisher, as ingest does; calls
 * refused during the outage are sent again, as clients do. After a warm-up, nats-server is killed
 * with SIGKILL, kept down BENCH_OUTAGE_SECONDS and restarted on the same port and store. Printed
 * per destination: the rate before; the rate while its backlog is delivered after the restart,
 * and how long that took; the rate in a window after that. And the slow endpoint's peak
 * concurrent requests while catching up (32 = both replicas use all their slots).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { StoredCall } from "@hookpost/contract";
import { eventSubject, msgIdHeaders, PipelinedPublisher } from "@hookpost/core";
import { connect, type NatsConnection } from "nats";
import { destination } from "../test/dispatcher/helpers.js";
import { NatsServer } from "../test/helpers/nats-server.js";
import { type ServiceProcess, spawnService } from "../test/helpers/service-process.js";
import { type Figure, printIfMain } from "./table.js";
import { defaultTopologyStore } from "./topology.js";

const RATE = Number(process.env.BENCH_OUTAGE_RATE ?? 250);
const OUTAGE_S = Number(process.env.BENCH_OUTAGE_SECONDS ?? 15);
const OUTAGES = Number(process.env.BENCH_OUTAGE_COUNT ?? 1);
const WARMUP_S = 20;
/** Window measured before the outage and after each destination's catch-up. */
const WINDOW_S = 20;
const SLOW_MS = 50;
const DESTS = ["slow", "healthy", "flaky"] as const;
type Dest = (typeof DESTS)[number];

/** Counts deliveries per destination (by path) and the slow endpoint's concurrent requests. */
class Endpoints {
  readonly count: Record<Dest, number> = { slow: 0, healthy: 0, flaky: 0 };
  /** Distinct calls delivered (Idempotency-Key): a redelivery after a lost ack counts once. */
  readonly unique: Record<Dest, Set<string>> = { slow: new Set(), healthy: new Set(), flaky: new Set() };
  slowInFlight = 0;
  slowPeak = 0;
  #n = 0;
  url = "";
  readonly server: Server = createServer((req, res) => {
    const dest = (req.url ?? "").slice(1) as Dest;
    const delivered = () => {
      this.count[dest]++;
      this.unique[dest].add(String(req.headers["idempotency-key"]));
    };
    req.resume();
    req.on("end", () => {
      if (dest === "slow") {
        this.slowInFlight++;
        this.slowPeak = Math.max(this.slowPeak, this.slowInFlight);
        setTimeout(() => {
          this.slowInFlight--;
          delivered();
          res.writeHead(200).end();
        }, SLOW_MS);
      } else if (dest === "flaky" && ++this.#n % 5 === 0) {
        res.writeHead(500).end();
      } else {
        delivered();
        res.writeHead(200).end();
      }
    });
  });
  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", () => resolve()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Publishes RATE calls per second until stopped. A call whose publish fails (NATS away) is sent
 * again, with the same message id, as a client retries: the outage leaves a backlog to catch up.
 */
function steadyLoad(nc: NatsConnection): { stop(): Promise<void>; published(): number; offered(): number } {
  const pipe = new PipelinedPublisher(nc, 2000);
  let stopped = false;
  let published = 0;
  let sent = 0;
  const retry: StoredCall[] = [];
  const publish = (call: StoredCall) =>
    pipe.publish(eventSubject("soak", "track"), JSON.stringify(call), msgIdHeaders(call.messageId)).then(
      () => published++,
      () => retry.push(call),
    );
  const run = (async () => {
    const started = Date.now();
    while (!stopped) {
      for (const call of retry.splice(0)) void publish(call);
      const due = Math.floor(((Date.now() - started) / 1000) * RATE);
      for (; sent < due; sent++) {
        const now = new Date().toISOString();
        const call: StoredCall = {
          type: "track",
          messageId: `soak-${sent}`,
          sourceId: "soak",
          receivedAt: now,
          timestamp: now,
          userId: `user-${sent % 1000}`,
          event: "Order Completed",
          properties: { orderId: sent, total: 42.5 },
        };
        void publish(call);
      }
      await sleep(20);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await run;
      pipe.close();
    },
    published: () => published,
    offered: () => sent,
  };
}

/** Deliveries per second of each destination over `seconds`. */
async function rates(ep: Endpoints, seconds: number): Promise<Record<Dest, number>> {
  const before = { ...ep.count };
  await sleep(seconds * 1000);
  const out = {} as Record<Dest, number>;
  for (const d of DESTS) out[d] = (ep.count[d] - before[d]) / seconds;
  return out;
}

export async function benchOutage(): Promise<Figure[]> {
  const server = await NatsServer.start();
  const ep = new Endpoints();
  await ep.listen();
  const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const figures: Figure[] = [];
  let procs: ServiceProcess[] = [];
  let load: ReturnType<typeof steadyLoad> | undefined;
  try {
    const store = await defaultTopologyStore(nc);
    for (const id of DESTS) {
      await store.putDestination(
        destination({ id, sourceIds: ["soak"], urls: [`${ep.url}/${id}`], sharedSecret: "bench-secret" }),
      );
    }
    store.close();
    procs = Array.from({ length: 2 }, () =>
      spawnService("services/dispatcher/main.ts", {
        NATS_URL: server.url,
        WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
        OPS_ADDR: "off",
        LOG_LEVEL: "warn",
        ATTEMPT_LOG: "off",
      }),
    );
    await sleep(3000);
    load = steadyLoad(nc);
    await sleep(WARMUP_S * 1000);
    const before = await rates(ep, WINDOW_S);
    for (const d of DESTS) {
      figures.push({ name: `${d}: deliveries/s before`, value: Math.round(before[d]), unit: "1/s" });
    }
    for (let i = 1; i <= OUTAGES; i++) {
      await server.kill("SIGKILL");
      await sleep(OUTAGE_S * 1000);
      await server.restart();
      const restarted = Date.now();
      const atRestart = { ...ep.count };
      ep.slowPeak = 0;
      // Caught up: every call offered so far is delivered but for half a second's worth (the flaky
      // destination always has some waiting for their retry), routing included.
      const caughtUp: Partial<Record<Dest, { s: number; rate: number }>> = {};
      while (Object.keys(caughtUp).length < DESTS.length && Date.now() - restarted < 120_000) {
        await sleep(250);
        for (const d of DESTS) {
          if (caughtUp[d] !== undefined) continue;
          const s = (Date.now() - restarted) / 1000;
          if (ep.unique[d].size >= load.offered() - RATE / 2) {
            caughtUp[d] = { s, rate: (ep.count[d] - atRestart[d]) / s };
          }
        }
      }
      const peak = ep.slowPeak;
      for (const d of DESTS) {
        const c = caughtUp[d];
        figures.push({
          name: `${d}: deliveries/s catching up after outage ${i}`,
          value: c ? Math.round(c.rate) : "-",
          unit: "1/s",
          note: c ? `backlog delivered ${c.s.toFixed(1)} s after the restart` : "backlog not gone in 120 s",
        });
      }
      const after = await rates(ep, WINDOW_S);
      for (const d of DESTS) {
        figures.push({
          name: `${d}: deliveries/s after outage ${i} (${OUTAGE_S} s)`,
          value: Math.round(after[d]),
          unit: "1/s",
          limit: { name: "before", value: before[d] },
        });
      }
      figures.push({
        name: `slow: peak concurrent requests catching up after outage ${i}`,
        value: peak,
        unit: "requests",
        note: "2 replicas x DELIVERY_CONCURRENCY 16 = 32 when every slot is used",
      });
    }
    figures.push({
      name: "calls published",
      value: load.published(),
      unit: "calls",
      note: `${RATE}/s offered`,
    });
  } finally {
    await load?.stop();
    for (const p of procs) p.proc.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
    await ep.close();
    await nc.close();
    await server.stop();
  }
  return figures;
}

await printIfMain(import.meta.url, benchOutage);
