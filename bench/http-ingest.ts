/**
 * HTTP ingest benchmark (issue 11): `/v1/batch` calls/s beside gRPC `Batch` calls/s, in one run,
 * with the same calls (same fields, same batch size, same concurrency), both into one in-process
 * ingest on a private nats-server. Every call is stored on JetStream before its answer. The
 * senders run in the same process (the gRPC one encodes with protobuf-es, as a caller would), so
 * the figures are of the whole exchange on one machine, not of the server alone.
 *
 *   npx tsx bench/http-ingest.ts
 *   HTTP_BENCH_CALLS=50000 npx tsx bench/http-ingest.ts
 */
import { createClient, writeKeyMetadata } from "@hookpost/client";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { startHttpBenchStack } from "./http-stack.js";
import { type Figure, printIfMain } from "./table.js";

const CALLS = Number(process.env.HTTP_BENCH_CALLS ?? 20_000);
const BATCH = 100;
const IN_FLIGHT = 8;

/** The i-th call's fields (the same for both transports but the id prefix). */
const call = (prefix: string, i: number) => ({
  messageId: `${prefix}-${i}`,
  userId: `user-${i % 1000}`,
  event: "Order Completed",
  properties: { plan: "pro", total: 12.5, items: [{ sku: "A-1", qty: 2 }], note: "x".repeat(100) },
  context: { ip: "203.0.113.9", library: { name: "bench", version: "1" } },
  timestamp: "2026-11-21T09:30:00.000Z",
});

/** Runs `send(batchIndex)` for every batch, IN_FLIGHT at a time; returns calls per second. */
async function rate(send: (b: number) => Promise<void>): Promise<number> {
  const batches = Math.ceil(CALLS / BATCH);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < batches) await send(next++);
    }),
  );
  return (batches * BATCH) / ((performance.now() - started) / 1000);
}

export async function benchHttpIngest(): Promise<Figure[]> {
  const stack = await startHttpBenchStack();
  try {
    const { writeKey } = stack;
    const grpc = createClient(IngestService, stack.address, { metadata: writeKeyMetadata(writeKey) });
    const auth = `Basic ${Buffer.from(`${writeKey}:`).toString("base64")}`;
    const url = `http://${stack.httpAddress}/v1/batch`;

    const viaGrpc = async (prefix: string, b: number) => {
      const calls = Array.from({ length: BATCH }, (_, j) => {
        const c = call(prefix, b * BATCH + j);
        const ts = { seconds: BigInt(Date.parse(c.timestamp) / 1000), nanos: 0 };
        return { call: { case: "track" as const, value: { ...c, timestamp: ts } } };
      });
      await grpc.batch({ calls });
    };
    const viaHttp = async (prefix: string, b: number) => {
      const batch = Array.from({ length: BATCH }, (_, j) => ({
        type: "track",
        ...call(prefix, b * BATCH + j),
      }));
      const res = await fetch(url, {
        method: "POST",
        headers: { Authorization: auth, "Content-Type": "application/json" },
        body: JSON.stringify({ batch }),
      });
      if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    };
    // Warm-up (connections, JIT), then each transport in turn, twice, keeping the best run.
    await rate((b) => viaGrpc("warm-g", b % 4));
    await rate((b) => viaHttp("warm-h", b % 4));
    let grpcRate = 0;
    let httpRate = 0;
    for (const round of [1, 2]) {
      grpcRate = Math.max(grpcRate, await rate((b) => viaGrpc(`g${round}`, b)));
      httpRate = Math.max(httpRate, await rate((b) => viaHttp(`h${round}`, b)));
    }
    grpc.close();
    const note = `${CALLS.toLocaleString("en")} track calls, ${BATCH} per batch, ${IN_FLIGHT} in flight, stored before the answer`;
    return [
      { name: "gRPC Batch", value: Math.round(grpcRate), unit: "calls/s", note },
      { name: "HTTP /v1/batch (JSON)", value: Math.round(httpRate), unit: "calls/s", note },
    ];
  } finally {
    await stack.stop();
  }
}

await printIfMain(import.meta.url, benchHttpIngest);
