/**
 * Per-source quota benchmark: what the quota costs ingest. The hot path (`admit`, per request)
 * and the refresh (every SOURCE_QUOTA_REFRESH per replica: per-subject counts of EVENTS and
 * DELIVERIES) with many sources and destinations pending.
 *
 *   npm run bench -- source-quota
 */

import { defaultSourceQuota, SourceQuota } from "@hookpost/api";
import { ConfigStore, DEFAULT_TOPOLOGY, deliverySubject, ensureTopology, eventSubject } from "@hookpost/core";
import { connect, headers } from "nats";
import pino from "pino";
import { NatsServer } from "../test/helpers/nats-server.js";
import { medianMs, putDestinations } from "./fill.js";
import { type Figure, printTable } from "./table.js";

const SOURCES = 1_000;
const DESTINATIONS = 10_000;
const REFRESHES = 20;
const ADMITS = 1_000_000;

export async function benchSourceQuota(): Promise<Figure[]> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  try {
    const jsm = await nc.jetstreamManager();
    await ensureTopology(jsm, DEFAULT_TOPOLOGY);
    const store = await ConfigStore.open(nc);
    await putDestinations(store, DESTINATIONS, { sourceOf: (i) => `s${i % SOURCES}`, enabled: true });
    const quota = new SourceQuota(defaultSourceQuota(DEFAULT_TOPOLOGY), {
      jsm,
      store,
      log: pino({ level: "silent" }),
    });
    const idle = await medianMs(REFRESHES, () => quota.refresh());
    // One pending message per destination and per source: the most subjects a refresh reads.
    const js = nc.jetstream();
    const body = "x".repeat(512);
    for (let i = 0; i < DESTINATIONS; i += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, (_, j) =>
          js.publish(deliverySubject(`d${i + j}`), body, { headers: headers() }),
        ),
      );
    }
    await Promise.all(
      Array.from({ length: SOURCES }, (_, i) => js.publish(eventSubject(`s${i}`, "track"), body)),
    );

    const busy = await medianMs(REFRESHES, () => quota.refresh());
    const pending = quota.pendingBytes("s1");

    const ids = Array.from({ length: SOURCES }, (_, i) => `s${i}`);
    const t = performance.now();
    for (let i = 0; i < ADMITS; i++) quota.admit(ids[i % SOURCES]!, 1);
    const admitNs = ((performance.now() - t) * 1e6) / ADMITS;
    store.close();
    return [
      {
        name: `refresh, nothing pending (median of ${REFRESHES})`,
        value: idle,
        unit: "ms",
        note: `${DESTINATIONS} destinations configured`,
      },
      {
        name: `refresh, ${SOURCES} sources and ${DESTINATIONS} destinations pending (median of ${REFRESHES})`,
        value: busy,
        unit: "ms",
        note: `source s1 pending ≈ ${Math.round(pending)} B`,
      },
      { name: "admit (per request, hot path)", value: admitNs, unit: "ns" },
    ];
  } finally {
    await nc.close();
    await server.stop();
  }
}

if (process.argv[1]?.endsWith("source-quota.ts")) printTable(await benchSourceQuota());
