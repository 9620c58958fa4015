/**
 * SDK end-to-end benchmark (issue 11): `@segment/analytics-node` pointed at Hookpost's
 * Segment-compatible HTTP API (only its `host` changed) beside our own client (`hookpost/client`,
 * gRPC `Batch`), in one run with the same processes: nats-server, ingest (gRPC and HTTP), one
 * dispatcher replica and the webhook receiver, each in its own process; the clients run in this
 * one. Figure: calls/s from the first enqueue until the receiver has every call, each exactly once.
 *
 * Both clients keep their default batching; each run enqueues N track calls at once, then calls
 * flush() (as an application does before it exits), with a fresh client per run.
 *
 *   npm run bench -- sdk-e2e        BENCH_SDK_CALLS=50000 npm run bench -- sdk-e2e
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Analytics } from "@hookpost/client";
import { DEFAULT_TOPOLOGY, ensureTopology } from "@hookpost/core";
import { Analytics as SegmentAnalytics } from "@segment/analytics-node";
import { connect } from "nats";
import { NatsServer } from "../test/helpers/nats-server.js";
import { trackInit } from "./payloads.js";
import {
  benchSource,
  ONE_SOURCE_QUOTAS,
  ReceiverProcess,
  startApi,
  startService,
  stopProcess,
} from "./procs/processes.js";
import { type Figure, printIfMain } from "./table.js";

const CALLS = Math.max(1, Number(process.env.BENCH_SDK_CALLS) || 20_000);
const WARMUP = Math.min(1_000, CALLS);
/** Measured runs per client, alternating which client goes first; the best run counts. */
const ROUNDS = 2;

interface Endpoints {
  grpc: string;
  http: string;
  writeKey: string;
}

/** One client's run: enqueues the calls, asks for a flush; resolves once the client is done. */
interface ClientRun {
  /** Resolves when the client reports every call stored (rejects on a reported failure). */
  drained: Promise<void>;
  /** HTTP requests the client made, retries included (when the client tells). */
  requests?: () => number;
  close(): Promise<void>;
}

type Client = (e: Endpoints, tag: string, calls: number) => ClientRun;

/** Our client over gRPC: defaults but the endpoint and a queue that holds the whole burst. */
const hookpost: Client = (e, tag, calls) => {
  const client = new Analytics(e.writeKey, { endpoint: e.grpc, maxQueueSize: calls });
  const failed = new Promise<never>((_, reject) => client.on("error", reject));
  for (let i = 0; i < calls; i++) client.track(trackInit(i, tag));
  return {
    drained: Promise.race([client.flush(), failed]),
    close: () => client.close(),
  };
};

/** @segment/analytics-node over HTTP: all defaults but `host`. */
const segment: Client = (e, tag, calls) => {
  const client = new SegmentAnalytics({ writeKey: e.writeKey, host: `http://${e.http}` });
  const failed = new Promise<never>((_, reject) =>
    client.on("error", (err) =>
      reject(new Error(`@segment/analytics-node ${err.code}: ${String(err.reason)}`)),
    ),
  );
  let requests = 0;
  client.on("http_request", () => requests++);
  for (let i = 0; i < calls; i++) client.track(trackInit(i, tag));
  // Called before any call reached its batch (the SDK queues them asynchronously), so the SDK
  // counts down to the last, partial batch and sends it at once instead of at its 10 s timer.
  return {
    drained: Promise.race([client.flush(), failed]),
    requests: () => requests,
    close: () => client.closeAndFlush(),
  };
};

interface Measurement {
  callsPerSecond: number;
  /** ms from the first enqueue until the client had every call stored (acknowledged). */
  storedMs: number;
  requests: number | undefined;
}

/** Checks that every delivery so far was a different call: no call arrived twice. */
function assertOnce(receiver: ReceiverProcess): void {
  if (receiver.requests !== receiver.arrivals.size)
    throw new Error(`${receiver.requests - receiver.arrivals.size} duplicate deliveries`);
}

async function measure(
  receiver: ReceiverProcess,
  e: Endpoints,
  client: Client,
  tag: string,
  calls: number,
): Promise<Measurement> {
  assertOnce(receiver);
  const started = performance.timeOrigin + performance.now();
  const run = client(e, tag, calls);
  try {
    const drained = run.drained.then(() => performance.timeOrigin + performance.now());
    // A failure the client reports ends the wait at once.
    const [storedAt] = await Promise.all([drained, receiver.waitForTag(tag, calls)]);
    let last = 0;
    for (let i = 0; i < calls; i++) last = Math.max(last, receiver.arrivals.get(`${tag}-${i}`)!);
    assertOnce(receiver);
    return {
      callsPerSecond: calls / ((last - started) / 1000),
      storedMs: storedAt - started,
      requests: run.requests?.(),
    };
  } finally {
    await run.close();
  }
}

export async function benchSdkE2e(): Promise<Figure[]> {
  const nats = await NatsServer.start();
  const receiver = await ReceiverProcess.start();
  const ingest = startApi(nats.url, ONE_SOURCE_QUOTAS); // one source sends everything
  const dispatcher = startService("dispatcher", {
    NATS_URL: nats.url,
    WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
    PULL_EXPIRES: "1s",
    LOG_LEVEL: "error",
  });
  try {
    const nc = await connect({ servers: nats.url, noAsyncTraces: true });
    await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
    await nc.close();
    const { grpc, http, admin, sourceId, writeKey } = await benchSource(ingest);
    await admin.createDestination({
      destination: { name: "bench", urls: [receiver.url], sourceIds: [sourceId], enabled: true },
    });
    admin.close();
    const e: Endpoints = { grpc, http, writeKey };

    const clients = { hookpost, segment };
    const best: Record<keyof typeof clients, Measurement | undefined> = {
      hookpost: undefined,
      segment: undefined,
    };
    for (const name of ["hookpost", "segment"] as const)
      await measure(receiver, e, clients[name], `warm-${name}`, WARMUP);
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (["hookpost", "segment"] as const) : (["segment", "hookpost"] as const);
      for (const name of order) {
        console.error(`sdk-e2e: ${name}, round ${r + 1}…`);
        const m = await measure(receiver, e, clients[name], `${name}-${r}`, CALLS);
        if (!best[name] || m.callsPerSecond > best[name].callsPerSecond) best[name] = m;
      }
    }
    // A duplicate of the last run's calls would come after its last first delivery.
    await sleep(1_000);
    assertOnce(receiver);
    const ours = best.hookpost!;
    const theirs = best.segment!;
    const stored = (m: Measurement) => `all stored after ${Math.round(m.storedMs).toLocaleString("en")} ms`;
    const calls = `${CALLS.toLocaleString("en")} track calls enqueued at once, then flush()`;
    return [
      {
        name: "hookpost/client (gRPC Batch): first enqueue -> last receipt",
        value: Math.round(ours.callsPerSecond),
        unit: "calls/s",
        note: `${calls}; defaults (flushAt 20, 4 batches in flight), maxQueueSize ${CALLS}; ${stored(ours)}; best of ${ROUNDS}`,
      },
      {
        name: "@segment/analytics-node (HTTP /v1/batch): first enqueue -> last receipt",
        value: Math.round(theirs.callsPerSecond),
        unit: "calls/s",
        limit: { name: "hookpost/client", value: ours.callsPerSecond },
        note: `limit = our client's figure (ratio = segment / ours); defaults but host (flushAt 15, no in-flight cap): ${theirs.requests} HTTP requests; ${stored(theirs)}; best of ${ROUNDS}`,
      },
    ];
  } finally {
    await stopProcess(dispatcher.proc);
    await stopProcess(ingest.proc);
    await receiver.stop();
    await nats.stop();
  }
}

await printIfMain(import.meta.url, benchSdkE2e, true);
