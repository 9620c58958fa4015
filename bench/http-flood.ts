/**
 * HTTP flood benchmark (issue 22 finding 8): 36 real `/v1/track` requests from 127.0.0.9, each on
 * a fresh connection, with no flood and during floods of 1 100 slow connections (trickling
 * header or body bytes) from 1, 4 or 22 loopback addresses: how many are answered 200, and
 * their median and slowest latency. Ingest (default HTTP limits), the flood and the real client
 * share this process, so the latencies include the flood's own cost on the event loop.
 *
 *   npx tsx bench/http-flood.ts
 */
import { fileURLToPath } from "node:url";
import { startIngest } from "@hookpost/api";
import { adminMetadata, createClient } from "@hookpost/client";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import pino from "pino";
import { floodTarget, underFlood } from "../test/helpers/http-flood.js";
import { NatsServer } from "../test/helpers/nats-server.js";
import { type Figure, printTable } from "./table.js";

const TOKEN = "bench-admin-token";
const many = Array.from({ length: 22 }, (_, i) => `127.0.1.${i + 1}`);
const SHAPES: { name: string; sources: string[]; body?: boolean }[] = [
  { name: "no flood", sources: [] },
  { name: "headers from 4 addresses", sources: ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] },
  { name: "headers from 1 address", sources: ["127.0.0.2"] },
  { name: "headers from 22 addresses", sources: many },
  { name: "bodies from 22 addresses", sources: many, body: true },
];

export async function benchHttpFlood(): Promise<Figure[]> {
  const nats = await NatsServer.start();
  const ingest = await startIngest(
    {
      natsUrl: nats.url,
      address: "127.0.0.1:0",
      httpAddress: "127.0.0.1:0",
      adminToken: TOKEN,
      publishTimeoutMs: 10_000,
      logLevel: "silent",
      topology: { ...DEFAULT_TOPOLOGY },
    },
    { logger: pino({ level: "silent" }) },
  );
  try {
    const admin = createClient(AdminService, ingest.address, { metadata: adminMetadata(TOKEN) });
    const { writeKey } = await admin.createSource({ name: "bench" });
    admin.close();
    const target = floodTarget(ingest.httpAddress!, writeKey);
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
    await ingest.close();
    await nats.stop();
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  printTable(await benchHttpFlood());
}
