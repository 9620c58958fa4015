import { createHash } from "node:crypto";
import type { OperatorEventType } from "@hookpost/contract";
import type { DestinationRecord } from "@hookpost/core";

/**
 * The operational events and their JSON bodies (docs/api.md#operational-webhooks). An event's id
 * is derived from what it announces, never drawn at random: two replicas announcing the same
 * thing (during a hand-over) make the same id, so JetStream stores it once (Nats-Msg-Id) and a
 * receiver that still got it twice drops it by `webhook-id`.
 */
export interface OperatorEvent {
  /** `evt_` + 24 hex digits; the webhook's `webhook-id` and `Idempotency-Key`. */
  id: string;
  type: OperatorEventType;
  /** The signed body, JSON. */
  body: string;
}

export function eventId(...parts: (string | number)[]): string {
  return `evt_${createHash("sha256").update(parts.join("\n")).digest("hex").slice(0, 24)}`;
}

/** What every event says about its destination. */
function destinationOf(d: DestinationRecord): { id: string; name: string; sourceIds: string[] } {
  return { id: d.id, name: d.name, sourceIds: [...d.sourceIds] };
}

function event(
  id: string,
  type: OperatorEventType,
  at: number,
  data: Record<string, unknown>,
): OperatorEvent {
  return { id, type, body: JSON.stringify({ type, timestamp: new Date(at).toISOString(), data }) };
}

const seconds = (ms: number) => Math.round(ms / 1000);
const rate = (r: number) => Math.round(r * 1000) / 1000;

export interface HealthFacts {
  attempts: number;
  failures: number;
  successRate: number;
  windowMs: number;
  lastFailure?: { ms: number; reason: string };
}

export function failingEvent(
  id: string,
  at: number,
  dest: DestinationRecord,
  f: HealthFacts,
  threshold: number,
): OperatorEvent {
  return event(id, "destination.failing", at, {
    destination: destinationOf(dest),
    successRate: rate(f.successRate),
    attempts: f.attempts,
    failures: f.failures,
    windowSeconds: seconds(f.windowMs),
    threshold,
    ...(f.lastFailure
      ? { lastFailure: { time: new Date(f.lastFailure.ms).toISOString(), reason: f.lastFailure.reason } }
      : {}),
  });
}

export interface PendingFacts {
  /** When the oldest pending call was first stored (ms). */
  oldestMs: number;
  behindAfterMs: number;
}

export function behindEvent(id: string, at: number, dest: DestinationRecord, p: PendingFacts): OperatorEvent {
  return event(id, "destination.behind", at, {
    destination: destinationOf(dest),
    oldestPendingTime: new Date(p.oldestMs).toISOString(),
    oldestPendingSeconds: seconds(at - p.oldestMs),
    behindAfterSeconds: seconds(p.behindAfterMs),
  });
}

/** The end of a condition announced earlier: `condition` says which, `since` when it was announced. */
export function recoveredEvent(
  id: string,
  at: number,
  dest: DestinationRecord,
  condition: "failing" | "behind",
  sinceMs: number,
  figures: Record<string, unknown>,
): OperatorEvent {
  return event(id, "destination.recovered", at, {
    destination: destinationOf(dest),
    condition,
    since: new Date(sinceMs).toISOString(),
    ...figures,
  });
}

export function recoveredFromFailing(f: HealthFacts, threshold: number): Record<string, unknown> {
  return {
    successRate: rate(f.successRate),
    attempts: f.attempts,
    failures: f.failures,
    windowSeconds: seconds(f.windowMs),
    threshold,
  };
}

export function recoveredFromBehind(at: number, oldestMs: number | undefined, behindAfterMs: number) {
  return {
    oldestPendingSeconds: oldestMs === undefined ? 0 : seconds(at - oldestMs),
    behindAfterSeconds: seconds(behindAfterMs),
  };
}

export function disabledEvent(at: number, dest: DestinationRecord): OperatorEvent {
  const disabledAt = dest.disabledAt ?? new Date(at).toISOString();
  return event(
    eventId("destination.disabled", dest.id, dest.createdAt, disabledAt),
    "destination.disabled",
    at,
    { destination: destinationOf(dest), reason: dest.disabledReason ?? "", disabledAt },
  );
}

export function deadLetterEvent(
  at: number,
  dest: DestinationRecord,
  window: { index: number; ms: number },
  count: number,
  lastReason: string,
): OperatorEvent {
  const start = window.index * window.ms;
  return event(
    eventId("dead_letter.created", dest.id, dest.createdAt, window.ms, window.index),
    "dead_letter.created",
    at,
    {
      destination: destinationOf(dest),
      count,
      windowStart: new Date(start).toISOString(),
      windowEnd: new Date(start + window.ms).toISOString(),
      lastReason,
    },
  );
}
