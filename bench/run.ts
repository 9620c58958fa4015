/**
 * `npm run bench`: runs every benchmark and prints one table of figures.
 * Benchmarks measure; they never gate CI on time. Pick some with `npm run bench -- client audience`.
 *
 * Each suite runs in a fresh process (this file with `--suite <name>`), so one suite's heap,
 * garbage and timers cannot disturb the next one's latency or memory figures.
 *
 * Numbers after a suite's name are its parameters: `npm run bench -- scale 100000`.
 */
import { fileURLToPath } from "node:url";
import { benchAudience } from "./audience.js";
import { benchClient } from "./client.js";
import { benchDispatcher } from "./dispatcher.js";
import { benchIngest } from "./ingest.js";
import { benchIsolation } from "./isolation.js";
import { runJsonChild } from "./json-child.js";
import { type Figure, printTable } from "./table.js";

/** One line per suite (merges stay trivial); they run in this order. */
const suites: Record<string, (params: string[]) => Promise<Figure[]>> = {
  ingest: benchIngest,
  dispatcher: benchDispatcher,
  audience: benchAudience,
  isolation: benchIsolation,
  client: benchClient,
  replicas: (await import("./replicas.js")).benchReplicas,
  "http-ingest": async () => (await import("./http-ingest.js")).benchHttpIngest(),
  "sdk-e2e": async () => (await import("./sdk-e2e.js")).benchSdkE2e(),
  "http-flood": async () => (await import("./http-flood.js")).benchHttpFlood(),
  "source-quota": async () => (await import("./source-quota.js")).benchSourceQuota(),
  "json-text": async () => (await import("./json-text.js")).benchJsonText(),
  outage: async () => (await import("./outage.js")).benchOutage(),
  health: async () => (await import("./health.js")).benchHealth(),
  ordered: async () => (await import("./ordered.js")).benchOrdered(),
  scale: async (params) => (await import("./scale.js")).benchScale(params),
  erasure: async (params) => (await import("./erasure.js")).benchErasure(params),
  shaping: async () => (await import("./shaping.js")).benchShaping(),
  "attempt-search": async (params) => (await import("./attempt-search.js")).benchAttemptSearch(params),
  batching: async () => (await import("./batching.js")).benchBatching(),
  alerts: async (params) => (await import("./alerts.js")).benchAlerts(params),
  perf: async () => (await import("./perf.js")).benchPerf(),
};

const args = process.argv.slice(2).filter((a) => a !== "--");
const suiteArg = args.indexOf("--suite");
if (suiteArg !== -1) {
  const figures = await suites[args[suiteArg + 1]!]!(args.slice(suiteArg + 2));
  process.stdout.write(`\n${JSON.stringify(figures)}\n`);
  process.exit(0);
}

/** Each suite named, with the numbers that follow it (its parameters). */
const runs: Array<{ name: string; params: string[] }> = [];
for (const a of args) {
  if (/^\d+$/.test(a) && runs.length > 0) runs.at(-1)!.params.push(a);
  else runs.push({ name: a, params: [] });
}
if (runs.length === 0) for (const name of Object.keys(suites)) runs.push({ name, params: [] });
const names = runs.map((r) => r.name);
const unknown = names.filter((n) => !(n in suites));
if (unknown.length > 0) {
  console.error(`unknown benchmark "${unknown[0]}"; choose from: ${Object.keys(suites).join(", ")}`);
  process.exit(2);
}
const file = fileURLToPath(import.meta.url);
const all: Figure[] = [];
for (const { name, params } of runs) {
  console.error(`running ${name} benchmark…`);
  const figures = await runJsonChild<Figure[]>(`${name} benchmark`, file, ["--suite", name, ...params], {
    showStderr: true,
  });
  for (const f of figures) all.push({ ...f, name: `${name}: ${f.name}` });
}
printTable(all);
