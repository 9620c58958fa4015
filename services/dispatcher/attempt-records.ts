import { type AttemptLog, type AttemptRecord, outcomeKind } from "@hookpost/core";
import { logUrl } from "./redact-url.js";
import type { AttemptOutcome } from "./sender.js";

/** A reason a person reads: "422 is not retried", "timeout after 5000 ms", "connection failed: …". */
export function readableReason(o: AttemptOutcome): string {
  if (o.error === "filtered") return `filtered: ${o.detail}`;
  if (o.ok) return `delivered (${o.status})`;
  switch (o.error) {
    case "connection":
      return `connection failed: ${o.detail}`;
    case "tls":
      return `TLS certificate refused, no request sent: ${o.detail}`;
    case "ssrf":
      return `refused before connecting: ${o.detail}`;
    default:
      return o.detail || (o.status ? `${o.status}` : o.error);
  }
}

/** Why every URL of an attempt failed, each reason once. */
export function readableReasons(outcomes: readonly AttemptOutcome[]): string {
  return [...new Set(outcomes.map(readableReason))].join("; ");
}

/** Log fields of the last URL tried, as `npm start` prints them (its line per failed attempt). */
export function lastOutcome(outcomes: readonly AttemptOutcome[]): Record<string, unknown> {
  const o = outcomes.at(-1);
  if (!o) return {};
  const response = o.responseExcerpt ? o.responseExcerpt.slice(0, 200) : undefined;
  return { url: logUrl(o.url), status: o.status, error: o.error, detail: o.detail, response };
}

export interface DeliveryFacts {
  messageId: string;
  destinationId: string;
  sourceId: string;
  attemptNumber: number;
  /** The call's user, for erasure (USER_HASH_HEADER). */
  userHash?: string;
  /** The call's type and event (CALL_TYPE_HEADER, EVENT_HEADER), for search. */
  callType?: string;
  event?: string;
  /** When the delivery is tried again (set on the last URL's record only). */
  nextAttemptMs?: number;
  /** When the delivery was first stored (DeliveryState.firstTimeMs): `firstTime` of a late attempt's records. */
  firstTimeMs?: number;
}

/**
 * The records of an attempt starting this long after its delivery was first stored say when that
 * was (AttemptRecord.firstTime), so that erasure finds them with their call however late they are
 * written. Given for parked deliveries and PER_USER heads; a fresh delivery carries nothing more.
 */
const LATE_ATTEMPT_MS = 1000;

/** Records one attempt's outcomes in the attempt log (when it is on); `nextAttemptMs` when a retry is due. */
export function attemptRecorder(
  log: AttemptLog,
  facts: DeliveryFacts,
  outcomes: readonly AttemptOutcome[],
): (nextAttemptMs?: number) => void {
  return (nextAttemptMs) => {
    if (!log.enabled) return;
    const f = nextAttemptMs === undefined ? facts : { ...facts, nextAttemptMs };
    for (const r of attemptRecords(f, outcomes)) log.attempt(r);
  };
}

/**
 * The attempt-log records of one delivery attempt (one per URL tried, in order). Without the
 * request body: every destination is sent the bytes the call's routed record holds, and the
 * reader joins them from there (a body per attempt was ~40 % of the log's bytes and CPU).
 */
export function attemptRecords(f: DeliveryFacts, outcomes: readonly AttemptOutcome[]): AttemptRecord[] {
  return outcomes
    .filter((o) => !o.aborted)
    .map((o, i, all) => {
      const r: AttemptRecord = {
        kind: "attempt",
        messageId: f.messageId,
        destinationId: f.destinationId,
        sourceId: f.sourceId,
        url: o.url,
        attemptNumber: f.attemptNumber,
        startTime: new Date(o.startedAt).toISOString(),
        durationMs: Math.round(o.durationMs),
        outcome: outcomeKind(o.status, o.error),
        status: o.status,
        reason: readableReason(o),
        retryable: o.retryable,
        responseBody: o.responseExcerpt,
      };
      if (f.userHash) r.userHash = f.userHash;
      if (f.callType) r.callType = f.callType;
      if (f.event !== undefined) r.event = f.event;
      if (o.requestBody !== undefined) r.requestBody = o.requestBody;
      if (f.firstTimeMs !== undefined && o.startedAt - f.firstTimeMs >= LATE_ATTEMPT_MS) {
        r.firstTime = new Date(f.firstTimeMs).toISOString();
      }
      if (f.nextAttemptMs !== undefined && i === all.length - 1) {
        r.nextAttemptTime = new Date(f.nextAttemptMs).toISOString();
      }
      return r;
    });
}
