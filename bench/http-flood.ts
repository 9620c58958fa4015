/**
 * HTTP flood benchmark (issue 22 finding 8): 36 real `/v1/track` requests from 127.0.0.9, each on
 * a fresh connection, with no flood and during floods of 1 100 slow connections (trickling
 * header or body bytes) from 1, 4 or 22 loopback addresses: how many are answered 200, and
 * their median and slowest latency. Ingest (default HTTP limits), the flood and the real client
 * share this process, so the latencies include the flood's own cost on the event loop.
 *
 *   npx tsx bench/http-flood.ts
 */
import { floodTarget, underFlood } from "../test/helpers/http-flood.js";
import { startHttpBenchStack } from "./http-stack.js";
import { type Figure, printIfMain } from "./table.js";

const many = Array.from({ length: 22 }, (_, i) => `127.0.1.${i + 1}`);
const SHAPES: { name: string; sources: string[]; body?: boolean }[] = [
  { name: "no flood", sources: [] },
  { name: "headers from 4 addresses", sources: ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] },
  { name: "headers from 1 address", sources: ["127.0.0.2"] },
  { name: "headers from 22 addresses", sources: many },
  { name: "bodies from 22 addresses", sources: many, body: true },
];

export async function benchHttpFlood(): Promise<Figure[]> {
  const stack = await startHttpBenchStack();
  try {
    const { writeKey } = stack;
    const target = floodTarget(stack.httpAddress, writeKey);
    const figures: Figure[] = [];
    for (const shape of SHAPES) {
      const answers = await underFlood(target, shape.sources, shape.body);
      const served = answers.filter((a) => a.answer === 200);
      const ms = served.map((a) => a.ms).sort((a, b) => a - b);
      const median = ms.length ? ms[Math.floor(ms.length / 2)]! : Number.NaN;
      const slowest = ms.length ? ms[ms.length - 1]! : Number.NaN;
      figures.push(
        { name: `${shape.name}: served`, value: served.length, unit: "of 36" },
        {
          name: `${shape.name}: latency`,
          value: `${median.toFixed(1)} / ${slowest.toFixed(1)}`,
          unit: "ms",
          note: "median / slowest of the served, fresh connection each",
        },
      );
    }
    return figures;
  } finally {
    await stack.stop();
  }
}

await printIfMain(import.meta.url, benchHttpFlood);
