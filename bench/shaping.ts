/**
 * The cost of shaping per call (issue 27, docs/design/shaping.md section 6): core's prepareRequests,
 * the one rendering path of delivery and the dry run, for a destination without shaping (the
 * stored bytes, signed), with a filter expression, with a mapping of ~10 fields, and with URL and
 * header templates. Target: a mapping ≤ 100 µs per call on this machine.
 */
import type { StoredCall } from "@hookpost/contract";
import { type DestinationRecord, prepareRequests, renderBody } from "@hookpost/core";
import type { Figure } from "./table.js";

const CALLS = 2000;

const call: StoredCall = {
  type: "track",
  messageId: "m-1",
  sourceId: "src",
  receivedAt: "2026-11-25T10:00:00.000Z",
  timestamp: "2026-11-25T10:00:00.000Z",
  userId: "user-42",
  event: "Order Completed",
  properties: {
    orderId: "o1",
    revenue: 42.5,
    currency: "EUR",
    plan: "pro",
    products: [{ sku: "a1", qty: 2 }],
  },
  context: { ip: "10.0.0.1", library: { name: "analytics-node", version: "6.0.0" }, locale: "en-US" },
};

const base: DestinationRecord = {
  id: "d1",
  name: "bench",
  sourceIds: ["src"],
  urls: ["https://hooks.example.com/in"],
  headers: { "X-Team": "growth" },
  sharedSecret: "s3cret",
  signing: "segment",
  enabled: true,
  createdAt: "2026-11-25T10:00:00.000Z",
  updatedAt: "2026-11-25T10:00:00.000Z",
};

const MAPPING = `{
  "id": $messageId, "user": userId, "event": event, "revenue": properties.revenue,
  "currency": properties.currency, "plan": properties.plan, "ip": context.ip,
  "library": context.library.name, "skus": properties.products.sku, "at": timestamp
}`;

const CASES: Array<[string, DestinationRecord]> = [
  ["no shaping (signed stored bytes)", base],
  [
    "filter expression",
    { ...base, filter: { expression: `properties.plan = "pro" and event = "Order Completed"` } },
  ],
  ["mapping of 10 fields", { ...base, mapping: MAPPING }],
  [
    "URL and header templates",
    {
      ...base,
      urls: ["https://hooks.example.com/users/{{ userId }}?e={{ event }}"],
      headers: { "X-User": "{{ userId }}" },
    },
  ],
];

/** Median of 5 runs of the mean µs per call. */
async function perCall(dest: DestinationRecord, body: Uint8Array): Promise<number> {
  const ids = { messageId: call.messageId, sourceId: "src", destinationId: dest.id };
  for (let i = 0; i < 200; i++) await prepareRequests(dest, body, ids);
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    for (let i = 0; i < CALLS; i++) await prepareRequests(dest, body, ids);
    runs.push(((performance.now() - t) * 1000) / CALLS);
  }
  return runs.sort((a, b) => a - b)[2]!;
}

export async function benchShaping(): Promise<Figure[]> {
  const body = new TextEncoder().encode(renderBody(call));
  const out: Figure[] = [];
  for (const [name, dest] of CASES) {
    const us = await perCall(dest, body);
    out.push({
      name: `prepare a request: ${name}`,
      value: Math.round(us * 10) / 10,
      unit: "µs/call",
      ...(name.startsWith("mapping") ? { limit: { name: "target", value: 100 } } : {}),
    });
  }
  return out;
}
