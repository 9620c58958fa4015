/**
 * `npm run bench`: runs every benchmark and prints one table of figures.
 * Benchmarks measure; they never gate CI on time. Pick some with `npm run bench -- client audience`.
 */
import { benchAudience } from "./audience.js";
import { benchClient } from "./client.js";
import { benchDispatcher } from "./dispatcher.js";
import { type Figure, printTable } from "./table.js";

const suites: Record<string, () => Promise<Figure[]>> = {
  client: benchClient,
  dispatcher: benchDispatcher,
  audience: benchAudience,
};

const wanted = process.argv.slice(2).filter((a) => a !== "--");
const names = wanted.length > 0 ? wanted : Object.keys(suites);
const all: Figure[] = [];
for (const name of names) {
  const suite = suites[name];
  if (!suite) {
    console.error(`unknown benchmark "${name}"; choose from: ${Object.keys(suites).join(", ")}`);
    process.exit(2);
  }
  console.error(`running ${name} benchmark…`);
  for (const f of await suite()) all.push({ ...f, name: `${name}: ${f.name}` });
}
printTable(all);
process.exit(0);
