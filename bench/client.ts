/**
 * Client benchmark: our client next to @segment/analytics-node, in one run. Both queue the same
 * 100 000 track calls with batching "off" (flush size and interval huge) against a loopback port
 * nobody listens on, so what is measured is the cost of enqueueing and of holding calls in memory.
 * Each client is measured in a fresh child process (after a warm-up) so that neither inherits the
 * other's garbage or JIT state.
 *
 * Run alone: `npx tsx bench/client.ts`.
 */
import { fileURLToPath } from "node:url";
import { Analytics } from "@hookpost/client";
import { Analytics as SegmentAnalytics } from "@segment/analytics-node";
import { runJsonChild } from "./json-child.js";
import { type Figure, printTable } from "./table.js";

export type BenchResult = Figure;

const CALLS = 100_000;
const WARMUP = 5_000;
const SAMPLE_EVERY = 5_000;
/** Port 9 (discard) on loopback: nothing listens, connections are refused at once. */
const DEAD_ENDPOINT = "127.0.0.1:9";

interface Measurement {
  callsPerSecond: number;
  peakHeapBytes: number;
  retainedHeapBytes: number;
}

type Track = (i: number) => void;

/** A full GC (the child runs with --expose-gc), so figures measure what is held, not garbage. */
function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Heap plus memory outside it (ArrayBuffers: our queued frames live there). */
function memory(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

function properties(i: number) {
  return { index: i, plan: "pro", price: 19.99, currency: "EUR", sku: `sku-${i % 1000}` };
}

async function measure(track: Track, calls: number): Promise<Measurement> {
  gc();
  const base = memory();
  let peak = base;
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    track(i);
    if (i % SAMPLE_EVERY === 0) peak = Math.max(peak, memory());
  }
  // Let work a call scheduled asynchronously (promises) run before stopping the clock.
  await new Promise((r) => setImmediate(r));
  const seconds = (performance.now() - started) / 1000;
  peak = Math.max(peak, memory());
  gc();
  const retained = memory() - base;
  return { callsPerSecond: calls / seconds, peakHeapBytes: peak - base, retainedHeapBytes: retained };
}

async function hookpost(calls: number): Promise<Measurement> {
  const client = new Analytics("bench-write-key", {
    endpoint: DEAD_ENDPOINT,
    flushAt: Number.MAX_SAFE_INTEGER,
    flushAfter: 2 ** 31 - 1,
    maxQueueSize: calls,
  });
  client.on("error", () => {}); // close() reports every unsent call; expected here
  try {
    return await measure(
      (i) => client.track({ userId: `user-${i}`, event: "Order Completed", properties: properties(i) }),
      calls,
    );
  } finally {
    await client.close({ timeoutMs: 0 });
  }
}

async function segment(calls: number): Promise<Measurement> {
  const client = new SegmentAnalytics({
    writeKey: "bench-write-key",
    host: `http://${DEAD_ENDPOINT}`,
    flushAt: Number.MAX_SAFE_INTEGER,
    flushInterval: 2 ** 31 - 1,
  });
  client.on("error", () => {});
  try {
    return await measure(
      (i) => client.track({ userId: `user-${i}`, event: "Order Completed", properties: properties(i) }),
      calls,
    );
  } finally {
    await client.closeAndFlush({ timeout: 1 }).catch(() => {});
  }
}

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;

const CLIENTS = { hookpost, segment };
type ClientName = keyof typeof CLIENTS;

/** Runs one measurement in a fresh process: this file with `--measure <client>`. */
function measureInChild(client: ClientName): Promise<Measurement> {
  return runJsonChild(`${client} measurement`, fileURLToPath(import.meta.url), ["--measure", client], {
    nodeFlags: ["--expose-gc", "--max-old-space-size=4096"],
    timeoutMs: 300_000,
  });
}

export async function benchClient(): Promise<BenchResult[]> {
  const ours = await measureInChild("hookpost");
  const theirs = await measureInChild("segment");
  const q = `${CALLS.toLocaleString("en")} track calls queued`;
  return [
    { name: "enqueue rate: hookpost", value: round(ours.callsPerSecond), unit: "calls/s", note: q },
    {
      name: "enqueue rate: @segment/analytics-node",
      value: round(theirs.callsPerSecond),
      unit: "calls/s",
      note: `${q}; it still sends 480 KB batches regardless of flushAt (to the dead port, retrying)`,
    },
    {
      name: "enqueue rate ratio (hookpost / segment)",
      value: round(ours.callsPerSecond / theirs.callsPerSecond, 2),
      unit: "x",
    },
    {
      name: "peak memory delta: hookpost",
      value: mib(ours.peakHeapBytes),
      unit: "MiB",
      note: `heap used + external; retained after GC: ${mib(ours.retainedHeapBytes)} MiB (${round(ours.retainedHeapBytes / CALLS)} B/call)`,
    },
    {
      name: "peak memory delta: @segment/analytics-node",
      value: mib(theirs.peakHeapBytes),
      unit: "MiB",
      note: `heap used + external; retained after GC: ${mib(theirs.retainedHeapBytes)} MiB (${round(theirs.retainedHeapBytes / CALLS)} B/call)`,
    },
    {
      name: "peak memory ratio (segment / hookpost)",
      value: round(theirs.peakHeapBytes / ours.peakHeapBytes, 2),
      unit: "x",
    },
  ];
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
const measureArg = process.argv.indexOf("--measure");

if (isMain && measureArg !== -1) {
  const client = CLIENTS[process.argv[measureArg + 1] as ClientName];
  await client(WARMUP);
  const result = await client(CALLS);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  // Segment's retry timers may linger on the dead port; the figures are out.
  process.exit(0);
} else if (isMain) {
  printTable(await benchClient());
}
