import { createServer, type Server, Socket } from "node:net";
import {
  ALERTS_BUCKET,
  AttemptLog,
  type ConfigStore,
  DEFAULT_TOPOLOGY,
  ensureTopology,
  healthSubject,
} from "@hookpost/core";
import {
  AlertMonitor,
  type AlertSettings,
  conditionKey,
  DispatcherMetrics,
  OperatorEventPublisher,
} from "@hookpost/dispatcher";
import { connect, type NatsConnection } from "nats";
import { afterAll, describe, expect, it } from "vitest";
import { destination } from "../dispatcher/helpers.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";
import { PAGER } from "./pager.js";

// A watcher cut off from NATS keeps believing it watches (its own view of the replicas holds only
// itself), while the others see it gone and one of them takes over and announces. When the first
// one comes back it is the first live replica again and goes on watching: what it announces must
// follow what was announced meanwhile, or a condition announced by the other replica is never
// resolved. Real nats-server; replica A reaches it through a TCP proxy the test cuts and heals;
// the replicas' views of each other are set by the test (as the registry would see them).

const f = useNats();

const ALERTS: AlertSettings = {
  checkMs: 200,
  healthWindowMs: 2000,
  minAttempts: 3,
  minIntervalMs: 1000,
  deadLetterWindowMs: 60_000,
  behindLookups: 500,
};

const webhook = PAGER;
const crm = destination({ id: "crm", urls: ["https://crm.example.com/hook"] });

/** The configuration both replicas read: one operator webhook, one destination. */
const store = {
  operatorWebhooks: () => [webhook],
  operatorWebhook: (id: string) => (id === webhook.id ? webhook : undefined),
  destinations: () => [crm],
  destination: (id: string) => (id === crm.id ? crm : undefined),
} as unknown as ConfigStore;

/** A TCP proxy to the nats-server that the test can cut (every connection dropped and refused) and heal. */
async function proxyTo(port: number): Promise<{ url: string; cut(): void; heal(): void; close(): void }> {
  const sockets = new Set<Socket>();
  let down = false;
  const server: Server = createServer((client) => {
    if (down) return void client.destroy();
    const upstream = new Socket();
    upstream.connect(port, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: own } = server.address() as { port: number };
  return {
    url: `nats://127.0.0.1:${own}`,
    cut() {
      down = true;
      for (const s of sockets) s.destroy();
    },
    heal() {
      down = false;
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** One replica's watcher: its own connection, publisher and metrics; `live` is its view of the replicas. */
async function replica(nc: NatsConnection, id: string, live: string[]) {
  const metrics = new DispatcherMetrics(async () => new Map());
  const registry = { id, live };
  const monitor = new AlertMonitor({
    nc,
    jsm: await nc.jetstreamManager(),
    store,
    registry: registry as never,
    publisher: new OperatorEventPublisher({
      js: nc.jetstream(),
      partitions: 8,
      answering: () => false,
      attemptLog: new AttemptLog(nc, { enabled: false, bodies: false, logger: quietLogger }),
      metrics,
      logger: quietLogger,
    }),
    metrics,
    logger: quietLogger,
    settings: ALERTS,
    replicas: 1,
  });
  const stored = async (type: string) =>
    (await metrics.operatorEvents.get()).values.find((v) => v.labels.type === type)?.value ?? 0;
  return { monitor, registry, stored };
}

const cleanup: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

describe("a watcher that comes back after another replica announced", () => {
  it("resolves the condition the other replica announced while it was away", async () => {
    const jsm = await f.nc.jetstreamManager();
    await ensureTopology(jsm, DEFAULT_TOPOLOGY);
    const proxy = await proxyTo(f.server.port);
    cleanup.push(() => proxy.close());
    const ncA = await connect({
      servers: proxy.url,
      reconnectTimeWait: 100,
      maxReconnectAttempts: -1,
      timeout: 2000,
    });
    cleanup.push(() => ncA.close());

    // The health summaries the dispatchers write, one a second (here every 200 ms): the
    // destination failing every attempt, or delivering every one.
    let failing = false;
    let lastFailing = 0;
    let publishing = true;
    const summaries = (async () => {
      const js = f.nc.jetstream();
      while (publishing) {
        const now = Date.now();
        const minute = String(Math.floor(now / 60_000) * 60_000);
        if (failing) lastFailing = now;
        await js
          .publish(
            healthSubject("r1"),
            JSON.stringify({
              kind: "health",
              replica: "r1",
              time: new Date(now).toISOString(),
              destinations: {
                crm: {
                  minutes: { [minute]: failing ? [0, 5] : [5, 0] },
                  ...(failing ? { lastFailure: { ms: now, reason: "503 is retried" } } : {}),
                },
              },
            }),
          )
          .catch(() => {});
        await new Promise((r) => setTimeout(r, 200)); // not a wait: the pace of the summaries
      }
    })();
    cleanup.push(async () => {
      publishing = false;
      await summaries;
    });

    const a = await replica(ncA, "a", ["a", "b"]);
    const b = await replica(f.nc, "b", ["a", "b"]);
    for (const r of [a, b]) {
      r.monitor.start();
      cleanup.push(() => r.monitor.close());
    }
    await until(() => a.monitor.watching && !b.monitor.watching, { message: "replica a watching" });
    const alerts = await f.nc.jetstream().views.kv(ALERTS_BUCKET);
    const key = conditionKey(webhook.id, crm.id);

    // A is cut off; B no longer hears from it and takes over. The destination starts failing:
    // B announces it.
    proxy.cut();
    b.registry.live = ["b"];
    failing = true;
    await until(async () => (await alerts.get(key))?.json<{ failing?: number }>().failing !== undefined, {
      timeout: 20_000,
      message: "destination.failing announced by replica b",
    });
    expect(await b.stored("destination.failing")).toBe(1);

    // B hears from A again and steps down; the destination recovers before A is back.
    b.registry.live = ["a", "b"];
    await until(() => !b.monitor.watching, { message: "replica b stepped down" });
    failing = false;
    // The failing seconds have left the health window (counted in buckets of a second).
    await until(() => Date.now() - lastFailing > ALERTS.healthWindowMs + 1500, {
      message: "the failing summaries out of the window",
    });
    proxy.heal();

    // A, watching all along in its own view, must resolve what B announced.
    await until(
      async () => {
        const st = (await alerts.get(key))?.json<{ failing?: number; seq: number }>();
        return st !== undefined && st.failing === undefined && st.seq === 2;
      },
      { timeout: 20_000, message: "destination.recovered recorded after replica a came back" },
    );
    expect(await a.stored("destination.recovered")).toBe(1);
    expect(a.monitor.watching).toBe(true);
  });
});
