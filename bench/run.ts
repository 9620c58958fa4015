/**
 * `npm run bench`: runs every benchmark and prints one table of figures.
 * Benchmarks measure; they never gate CI on time. Pick some with `npm run bench -- client audience`.
 *
 * Each suite runs in a fresh process (this file with `--suite <name>`), so one suite's heap,
 * garbage and timers cannot disturb the next one's latency or memory figures.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { benchAudience } from "./audience.js";
import { benchClient } from "./client.js";
import { benchDispatcher } from "./dispatcher.js";
import { type Figure, printTable } from "./table.js";

const suites: Record<string, () => Promise<Figure[]>> = {
  client: benchClient,
  dispatcher: benchDispatcher,
  audience: benchAudience,
};

function runInChild(name: string): Promise<Figure[]> {
  const file = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ["--import", "tsx", file, "--suite", name],
      { maxBuffer: 16 << 20 },
      (err, stdout) => {
        if (err) reject(new Error(`${name} benchmark failed: ${err.message}`));
        else resolve(JSON.parse(stdout.trim().split("\n").pop()!) as Figure[]);
      },
    );
    child.stderr?.pipe(process.stderr);
  });
}

const args = process.argv.slice(2).filter((a) => a !== "--");
const suiteArg = args.indexOf("--suite");
if (suiteArg !== -1) {
  const figures = await suites[args[suiteArg + 1]!]!();
  process.stdout.write(`\n${JSON.stringify(figures)}\n`);
  process.exit(0);
}

const names = args.length > 0 ? args : Object.keys(suites);
const unknown = names.filter((n) => !(n in suites));
if (unknown.length > 0) {
  console.error(`unknown benchmark "${unknown[0]}"; choose from: ${Object.keys(suites).join(", ")}`);
  process.exit(2);
}
const all: Figure[] = [];
for (const name of names) {
  console.error(`running ${name} benchmark…`);
  for (const f of await runInChild(name)) all.push({ ...f, name: `${name}: ${f.name}` });
}
printTable(all);
