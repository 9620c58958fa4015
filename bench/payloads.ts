import type { JsonObject } from "@bufbuild/protobuf";
import type { StoredCall } from "@hookpost/contract";
import { eventSubject } from "@hookpost/core";
import { headers, type JetStreamClient } from "nats";

/**
 * The bench call: a track call of about 300 bytes once stored (JSON on EVENTS). The gRPC
 * figures send `trackInit`, the raw JetStream limit publishes `storedTrack` (what ingest stores
 * for it), so both sides move the same payloads.
 */
export function trackInit(i: number, tag: string) {
  return {
    messageId: `${tag}-${i}`,
    userId: `user-${i % 1000}`,
    event: "Order Completed",
    properties: benchProperties(i),
    context: { ip: "203.0.113.7", library: { name: "bench", version: "1" } } as JsonObject,
  };
}

function benchProperties(i: number): JsonObject {
  return { orderId: i, total: 42.5, currency: "EUR", items: [{ sku: `A-${i % 100}`, qty: 2 }] };
}

export function storedTrack(i: number, tag: string, sourceId: string): StoredCall {
  const now = new Date().toISOString();
  const t = trackInit(i, tag);
  return { type: "track", sourceId, receivedAt: now, timestamp: now, ...t };
}

/** Puts bench call `i` on EVENTS the way ingest stores it, with the same dedup header. */
export function publishStoredTrack(js: JetStreamClient, i: number, tag: string, sourceId: string) {
  return publishStored(js, storedTrack(i, tag, sourceId));
}

/** Puts a stored call on EVENTS the way ingest stores it, with the same dedup header. */
export function publishStored(js: JetStreamClient, call: StoredCall) {
  const h = headers();
  h.set("Nats-Msg-Id", `${call.sourceId}:${call.messageId}`);
  return js.publish(eventSubject(call.sourceId, call.type), JSON.stringify(call), { headers: h });
}

/** Runs `fn(i)` for i in [0, total) with at most `window` in flight; resolves with items/s. */
export async function pipelined(
  total: number,
  window: number,
  fn: (i: number) => Promise<unknown>,
): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < total) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(window, total) }, worker));
  return total / ((performance.now() - started) / 1000);
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
  );
}

export const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;
