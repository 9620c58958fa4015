/**
 * Issue 25's table: each figure 3 times (a fresh set of processes per run) and its median,
 * beside the limit measured in the same run, with the configuration it ran with. Under 5 minutes.
 *
 * - ingest: HTTP `/v1/batch` and gRPC `Batch` (SDK frames) against the raw JetStream publish of
 *   the same bytes (target 0.9x);
 * - dispatch from a backlog, 1 replica, against the raw forwarder (target 0.7x), and the CPU per
 *   delivery of the replica and nats-server together (target 150 µs);
 * - p99 from HTTP send to receipt at a steady 2 000 calls/s (target 10 ms), and the rate at which
 *   the p99 crosses 50 ms.
 *
 *   npm run bench -- perf            BENCH_PERF_RUNS=5 npm run bench -- perf
 */
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { runJsonChild } from "./json-child.js";
import { percentile } from "./payloads.js";
import { type Figure, printIfMain } from "./table.js";

const RUNS = Number(process.env.BENCH_PERF_RUNS ?? 3);
/** A smaller drain than `npm run bench -- dispatcher` (20 000), so that 3 runs fit in 5 minutes. */
const DELIVERIES = process.env.BENCH_DELIVERIES ?? "10000";
const RUN_FILE = fileURLToPath(new URL("./run.ts", import.meta.url));

const median = (values: number[]) => percentile(values, 50);

/** The median of each figure over the runs (by name, in the first run's order); limits likewise. */
function medians(runs: Figure[][]): Figure[] {
  return runs[0]!.map((first) => {
    const same = runs.map((r) => r.find((f) => f.name === first.name)).filter((f) => f !== undefined);
    const values = same.map((f) => f.value).filter((v): v is number => typeof v === "number");
    const limits = same.map((f) => f.limit?.value).filter((v): v is number => v !== undefined);
    const spread = values.length > 1 ? `runs: ${values.map((v) => Math.round(v * 10) / 10).join(" / ")}` : "";
    // The figure and its limit move together within a run: the ratio of each run says more.
    const ratios =
      limits.length === values.length && limits.length > 1
        ? `ratio per run ${values.map((v, i) => `${(v / limits[i]!).toFixed(2)}x`).join(" / ")}`
        : "";
    return {
      name: first.name,
      value: values.length > 0 ? Math.round(median(values) * 10) / 10 : first.value,
      unit: first.unit,
      ...(first.limit && { limit: { name: first.limit.name, value: median(limits) } }),
      note: [spread, ratios, first.note].filter(Boolean).join("; "),
    };
  });
}

export async function benchPerf(): Promise<Figure[]> {
  process.env.BENCH_DELIVERIES = DELIVERIES;
  const started = performance.now();
  const runs: Figure[][] = [];
  for (let i = 0; i < RUNS; i++) {
    console.error(`  perf: run ${i + 1} of ${RUNS}`);
    const suite = (name: string) =>
      runJsonChild<Figure[]>(`${name} (perf)`, RUN_FILE, ["--suite", name, "perf"], { showStderr: false });
    const ingest = await suite("ingest");
    const dispatcher = await suite("dispatcher");
    runs.push([...ingest.map((f) => ({ ...f, name: `ingest: ${f.name}` })), ...dispatcher]);
  }
  const minutes = (performance.now() - started) / 60_000;
  return [
    {
      name: "configuration",
      value: "-",
      unit: "",
      note:
        `${availableParallelism()} cores; 1 nats-server (file store, R1), api, 1 dispatcher replica, receiver, each its own process; ` +
        `track calls of ~300 B; ingest: batches of 100, 8 in flight; drain: ${DELIVERIES} calls, 1 destination, ` +
        "ROUTER_CONCURRENCY 64, DELIVERY_CONCURRENCY 16; on: signing, attempt log, tracing hooks, confirmed acks, direct delivery",
    },
    ...medians(runs),
    { name: "runs (median of each figure)", value: RUNS, unit: "", note: `${minutes.toFixed(1)} min in all` },
  ];
}

await printIfMain(import.meta.url, benchPerf, true);
