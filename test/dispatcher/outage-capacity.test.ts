import { setTimeout as sleep } from "node:timers/promises";
import {
  ConfigStore,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  ensureTopology,
  MESSAGE_ID_HEADER,
  PipelinedPublisher,
  partitionConsumer,
  partitionOf,
  partitionSubject,
  SOURCE_ID_HEADER,
} from "@hookpost/core";
import { renderBody } from "@hookpost/dispatcher";
import { connect, headers, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsServer } from "../helpers/nats-server.js";
import { type ServiceProcess, spawnService } from "../helpers/service-process.js";
import { until } from "../helpers/until.js";
import { destination, Receiver, track } from "./helpers.js";

/**
 * Issue 22, finding 9: after a nats-server outage a replica kept only part of its delivery slots
 * for good. Two dispatcher processes (DELIVERY_CONCURRENCY 16 each) and an endpoint taking 50 ms:
 * with a backlog the endpoint sees 32 requests at once. nats-server is killed (SIGKILL) under a
 * steady load, kept down 15 s and restarted on the same port and store, three times; each time
 * the endpoint must see (nearly) all 32 slots used again within 30 s. Then the same after one
 * dispatcher is killed (SIGKILL) and started again.
 */

const CONCURRENCY = 16;
const SLOTS = 2 * CONCURRENCY;
/** 85 % of every slot: a leaked slot or two on a busy machine passes, a lost pull request does not. */
const ENOUGH = Math.ceil(SLOTS * 0.85);
const ENDPOINT_MS = 50;
const OUTAGE_MS = 15_000;
const RECOVER_MS = 30_000;
const DEST = "slow";
/** DELIVERY_PARTITIONS (its default). */
const PARTITIONS = 8;

let server: NatsServer;
let nc: NatsConnection;
let pipe: PipelinedPublisher;
let rx: Receiver;
let procs: ServiceProcess[] = [];
let stopLoad = false;
let load: Promise<void> | undefined;
/** Requests the endpoint is answering right now, and the most at once since the last reset. */
let concurrent = 0;
let peak = 0;
let sent = 0;

/** Publishes one delivery to DELIVERIES the way the router does (body, message and source id). */
function deliver(): Promise<unknown> {
  const call = track({ sourceId: "soak" });
  const h = headers();
  h.set("Nats-Msg-Id", `${call.messageId}:${DEST}`);
  h.set(MESSAGE_ID_HEADER, call.messageId);
  h.set(SOURCE_ID_HEADER, call.sourceId);
  sent++;
  // While nats-server is down the publish fails: a call that was never accepted.
  // Spread over the partitions as the router does.
  return pipe
    .publish(partitionSubject(partitionOf(call.messageId, PARTITIONS), DEST), renderBody(call), h)
    .catch(() => undefined);
}

/** A steady 100 calls/s: pull requests are waiting at the server when it is killed. */
async function steadyLoad(): Promise<void> {
  while (!stopLoad) {
    for (let i = 0; i < 10; i++) void deliver();
    await sleep(100); // not a wait: paces the steady load
  }
}

/**
 * Publishes bursts (a backlog deeper than both replicas' slots) until the endpoint has seen
 * `ENOUGH` requests at once, or `ms` passed; returns the peaks seen.
 */
async function saturate(ms: number): Promise<{ ok: boolean; peaks: number[] }> {
  const deadline = Date.now() + ms;
  const peaks: number[] = [];
  while (Date.now() < deadline) {
    peak = 0;
    const target = rx.requests.length + 600;
    await Promise.all(Array.from({ length: 600 }, deliver));
    // Until this burst is delivered (its slots are what we look at), or the time is up.
    await until(() => rx.requests.length >= target || peak >= ENOUGH, {
      timeout: Math.max(1, deadline - Date.now()),
      interval: 20,
      message: "the burst delivered",
    }).catch(() => undefined); // the time is up: the peaks say how far it got
    peaks.push(peak);
    if (peak >= ENOUGH) return { ok: true, peaks };
  }
  return { ok: false, peaks };
}

/** A dispatcher process with production settings but for the SSRF allowance and logs. */
function dispatcher(): ServiceProcess {
  return spawnService("services/dispatcher/main.ts", {
    NATS_URL: server.url,
    WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
    OPS_ADDR: "off",
    LOG_LEVEL: "info",
    ATTEMPT_LOG: "off",
    DELIVERY_CONCURRENCY: String(CONCURRENCY),
  });
}

beforeAll(async () => {
  server = await NatsServer.start();
  nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
  rx = await Receiver.http();
  rx.respond = () => {
    concurrent++;
    peak = Math.max(peak, concurrent);
    setTimeout(() => concurrent--, ENDPOINT_MS); // not a wait: the endpoint's answer time
    return { status: 200, delayMs: ENDPOINT_MS };
  };
  const store = await ConfigStore.open(nc);
  await store.putDestination(destination({ id: DEST, sourceIds: ["soak"], urls: [rx.url()] }));
  store.close();
  pipe = new PipelinedPublisher(nc, 2000);
  procs = [dispatcher(), dispatcher()];
  await Promise.all(procs.map((p) => p.waitFor("delivering: every partition pulled", 50_000)));
  load = steadyLoad();
});

afterAll(async () => {
  stopLoad = true;
  await load;
  for (const p of procs) p.proc.kill("SIGTERM");
  await Promise.all(procs.map((p) => p.exited));
  pipe?.close();
  await nc?.close();
  await rx?.close();
  await server?.stop();
});

describe("delivery capacity after a NATS outage", () => {
  it("uses every slot of both replicas again within 30 s of each of three 15 s outages", async () => {
    const before = await saturate(RECOVER_MS);
    expect(before.ok, `before any outage, peaks ${before.peaks.join(", ")} of ${SLOTS}`).toBe(true);
    for (let outage = 1; outage <= 3; outage++) {
      // Steady load only: pull requests wait at the server when it dies.
      await until(
        async () =>
          (await (await nc.jetstreamManager()).consumers.info(DELIVERIES_STREAM, partitionConsumer(0)))
            .num_waiting >= procs.length,
        { timeout: 30_000, message: "a pull request of every replica waiting at the server" },
      );
      await server.kill("SIGKILL");
      await sleep(OUTAGE_MS); // not a wait: the outage itself (the scenario)
      await server.restart();
      const after = await saturate(RECOVER_MS);
      expect(
        after.ok,
        `after outage ${outage}: the endpoint saw at most ${Math.max(...after.peaks)} requests at once ` +
          `(peaks ${after.peaks.join(", ")}) in ${RECOVER_MS / 1000} s, of ${SLOTS} slots; ` +
          `${sent} calls published, ${rx.requests.length} requests received`,
      ).toBe(true);
    }
  }, 240_000);

  it("uses every slot of both replicas again within 30 s of a replica killed and started again", async () => {
    const killed = procs[0]!;
    killed.proc.kill("SIGKILL");
    await killed.exited;
    procs[0] = dispatcher();
    await procs[0].waitFor("delivering: every partition pulled", 50_000);
    const after = await saturate(RECOVER_MS);
    expect(
      after.ok,
      `after the restart: at most ${Math.max(...after.peaks)} requests at once (peaks ${after.peaks.join(", ")}) of ${SLOTS}`,
    ).toBe(true);
  }, 120_000);
});
