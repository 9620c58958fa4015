import { durationMs } from "@bufbuild/protobuf/wkt";
import { formatDuration } from "@hookpost/contract";
import {
  type Attempt,
  AttemptOutcome,
  BreakerState,
  DeliveryState,
  type DestinationHealth,
  DestinationState,
  type GetAttemptLogInfoResponse,
  type GetMessageResponse,
  type LogEntry,
  LogStatus,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { iso } from "./views.js";

/** The attempt log in the CLI's words, for `--json` and tables. */
export interface AttemptView {
  sequence: bigint;
  messageId: string;
  destinationId: string;
  sourceId: string;
  url: string;
  attempt: number;
  startTime: string | null;
  durationMs: number;
  outcome: string;
  status: number;
  reason: string;
  retryable: boolean;
  nextAttemptTime: string | null;
  responseBody: string;
  requestBody: string;
}

/**
 * The CLI's word for a value of a proto enum: its name in lower case, `_` as `-` ("client-error",
 * "dead-letter", "half-open"); "unknown" for UNSPECIFIED and for a value newer than this CLI.
 */
export function enumWord(e: Record<number, string>, value: number): string {
  const name = e[value];
  return name === undefined || name === "UNSPECIFIED" ? "unknown" : name.toLowerCase().replaceAll("_", "-");
}

/** "closed", "open until <time>" or "half-open": the breaker in one phrase. */
export function breakerText(h: { breaker: string; breakerOpenUntil: string | null }): string {
  if (h.breaker === "open" && h.breakerOpenUntil) return `open until ${h.breakerOpenUntil}`;
  return h.breaker;
}

export function attemptView(a: Attempt): AttemptView {
  return {
    sequence: a.sequence,
    messageId: a.messageId,
    destinationId: a.destinationId,
    sourceId: a.sourceId,
    url: a.url,
    attempt: a.attemptNumber,
    startTime: iso(a.startTime),
    durationMs: a.durationMs,
    outcome: enumWord(AttemptOutcome, a.outcome),
    status: a.status,
    reason: a.reason,
    retryable: a.retryable,
    nextAttemptTime: iso(a.nextAttemptTime),
    responseBody: a.responseBody,
    requestBody: a.requestBody,
  };
}

/** One entry of an attempt-log search, for `--json` and tables. */
export function logEntryView(e: LogEntry) {
  return {
    sequence: e.sequence,
    time: iso(e.time),
    status: enumWord(LogStatus, e.status),
    messageId: e.messageId,
    sourceId: e.sourceId,
    destinationId: e.destinationId,
    httpStatus: e.httpStatus,
    callType: e.callType,
    event: e.event,
    reason: e.reason,
    ...(e.attempt ? { attempt: attemptView(e.attempt) } : {}),
    ...(e.deadLetterSequence ? { deadLetterSequence: e.deadLetterSequence } : {}),
  };
}

/** `1.5 GiB`: a byte count a person reads. */
export function bytesText(n: bigint | number): string {
  let v = Number(n);
  for (const unit of ["bytes", "KiB", "MiB", "GiB", "TiB"]) {
    if (v < 1024 || unit === "TiB") return unit === "bytes" ? `${v} bytes` : `${v.toFixed(1)} ${unit}`;
    v /= 1024;
  }
  return `${v} bytes`;
}

/** The attempt log's retention and what it holds, for `--json` and the plain text. */
export function logInfoView(i: GetAttemptLogInfoResponse) {
  const maxAgeMs = i.maxAge ? durationMs(i.maxAge) : 0;
  return {
    maxAge: maxAgeMs > 0 ? formatDuration(maxAgeMs) : "none",
    maxBytes: i.maxBytes,
    bytes: i.bytes,
    records: i.records,
    oldestTime: iso(i.oldestTime),
    newestTime: iso(i.newestTime),
    indexBytes: i.indexBytes,
    indexMaxBytes: i.indexMaxBytes,
    unindexedRecords: i.unindexedRecords,
  };
}

/** `500`, `timeout`, `ssrf`: what came back, in one word. */
export function resultText(a: AttemptView): string {
  return a.status ? String(a.status) : a.outcome;
}

/** One line of a response body for a table cell. */
export function excerpt(text: string, max = 60): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

export function messageView(m: GetMessageResponse) {
  return {
    messageId: m.messageId,
    sourceId: m.sourceId,
    receivedTime: iso(m.receivedTime),
    noDestination: m.noDestination,
    deliveries: m.deliveries.map((d) => ({
      destinationId: d.destinationId,
      state: enumWord(DeliveryState, d.state),
      /** When filtered: why (`consent: "Advertising" not granted`); null otherwise. */
      filterReason: d.filterReason || null,
      attempts: d.attempts,
      nextAttemptTime: iso(d.nextAttemptTime),
      deadLetterSequence: d.deadLetterSequence === 0n ? null : d.deadLetterSequence,
    })),
    attempts: m.attempts.map(attemptView),
    body: m.body,
  };
}

export function healthView(h: DestinationHealth) {
  return {
    destinationId: h.destinationId,
    name: h.name,
    state: enumWord(DestinationState, h.state),
    disabledReason: h.disabledReason,
    backlog: h.backlog,
    oldestWaitingTime: iso(h.oldestWaitingTime),
    deliveries5m: h.deliveries5m,
    failures5m: h.failures5m,
    deliveries1h: h.deliveries1h,
    failures1h: h.failures1h,
    successRate1h: h.successRate1h,
    lastSuccessTime: iso(h.lastSuccessTime),
    lastFailureTime: iso(h.lastFailureTime),
    lastFailureReason: h.lastFailureReason,
    consecutiveFailures: h.consecutiveFailures,
    nextRetryTime: iso(h.nextRetryTime),
    incomingPerSecond: h.incomingPerSecond,
    deliveredPerSecond: h.deliveredPerSecond,
    minutes: h.minutes.map((m) => ({
      startTime: iso(m.startTime),
      delivered: m.delivered,
      failed: m.failed,
    })),
    breaker: enumWord(BreakerState, h.breakerState),
    breakerOpenUntil: iso(h.breakerOpenUntil),
    breakerReplicas: h.breakerReplicas,
  };
}
