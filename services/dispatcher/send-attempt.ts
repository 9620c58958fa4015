import type { DestinationRecord } from "@hookpost/core";
import { statusClass } from "@hookpost/core";
import type { DispatcherMetrics } from "./metrics.js";
import { type DeliveryResult, notSentOutcome, type WebhookSender } from "./sender.js";

/**
 * One attempt over the destination's URLs, for the unordered and the ordered path alike. A body
 * that could not be rendered, or whatever stopped the request before it was sent (the sender
 * turns what it foresees into outcomes itself), is a failed attempt too: recorded, retried,
 * dead-lettered at the window, never a silent hand-back.
 */
export async function sendAttempt(
  sender: WebhookSender,
  dest: DestinationRecord,
  call: { data: Uint8Array; messageId: string; sourceId: string; notRendered: string | undefined },
  signal: AbortSignal,
  trace: Parameters<WebhookSender["deliver"]>[4],
): Promise<DeliveryResult> {
  const notSent = (why: string): DeliveryResult => ({
    delivered: false,
    outcomes: [notSentOutcome(dest.urls?.[0] ?? "", why)],
  });
  if (call.notRendered) return notSent(`the webhook body could not be rendered: ${call.notRendered}`);
  try {
    const ids = { messageId: call.messageId, sourceId: call.sourceId, destinationId: dest.id };
    return await sender.deliver(dest, call.data, ids, signal, trace);
  } catch (err) {
    return notSent(preparationError(err));
  }
}

/** Latency of each request of an attempt, by result class; one never sent has none. */
export function observeLatency(
  metrics: DispatcherMetrics,
  destinationId: string,
  result: DeliveryResult,
): void {
  for (const o of result.outcomes) {
    if (o.aborted || o.error === "not_sent" || o.error === "filtered") continue;
    const labels = { destination: destinationId, result: statusClass(o.status, o.error) };
    metrics.attemptSeconds.observe(labels, o.durationMs / 1000);
  }
}

/** What went wrong preparing a request, without a stack (an error's message names no secret). */
function preparationError(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.slice(0, 300);
}
