/**
 * The HTTP API's JSON text scan (packages/contract/src/json-text.ts: duplicate keys, numbers that would
 * change, sizes as stored) beside the JSON.parse it follows, on the same /v1/batch body of
 * realistic track calls: the scan's cost per request, as a share of the parse every request pays.
 */
import { scanJsonText } from "@hookpost/contract";
import type { Figure } from "./table.js";

const CALLS = 1000;
const ROUNDS = 300;

function body(): Buffer {
  const batch = Array.from({ length: CALLS }, (_, i) => ({
    type: "track",
    messageId: `m-${i}-abcdefabcdef`,
    userId: `user-${i}`,
    event: "Order Completed",
    timestamp: "2026-11-21T09:30:00.000Z",
    properties: {
      orderId: `o${i}`,
      revenue: 12.5 + i,
      currency: "EUR",
      products: [
        { sku: "a1", price: 3.5, qty: 2 },
        { sku: "b2", price: 5.5, qty: 1 },
      ],
    },
    context: { ip: "10.0.0.1", library: { name: "analytics-node", version: "6.0.0" }, locale: "en-US" },
  }));
  return Buffer.from(JSON.stringify({ batch }));
}

/** Median over 5 runs of the mean time of one call of `fn`, in ms. */
function time(fn: () => unknown): number {
  for (let i = 0; i < 50; i++) fn();
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    for (let i = 0; i < ROUNDS; i++) fn();
    runs.push((performance.now() - t) / ROUNDS);
  }
  return runs.sort((a, b) => a - b)[2]!;
}

export async function benchJsonText(): Promise<Figure[]> {
  const bytes = body();
  const parse = time(() => JSON.parse(bytes.toString("utf8")));
  const scan = time(() => scanJsonText(bytes, "batch"));
  return [
    {
      name: `scan of a ${CALLS}-call /v1/batch body (${Math.round(bytes.length / 1024)} KiB)`,
      value: Math.round(scan * 1000) / 1000,
      unit: "ms",
      limit: { name: "JSON.parse of it", value: parse },
      note: `${Math.round(bytes.length / scan / 1000)} MB/s`,
    },
  ];
}
