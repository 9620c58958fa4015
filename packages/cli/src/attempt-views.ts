import {
  type Attempt,
  AttemptOutcome,
  BreakerState,
  DeliveryState,
  type DestinationHealth,
  DestinationState,
  type GetMessageResponse,
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

const OUTCOME_NAMES: Record<AttemptOutcome, string> = {
  [AttemptOutcome.UNSPECIFIED]: "unknown",
  [AttemptOutcome.SUCCESS]: "success",
  [AttemptOutcome.REDIRECT]: "redirect",
  [AttemptOutcome.CLIENT_ERROR]: "client-error",
  [AttemptOutcome.SERVER_ERROR]: "server-error",
  [AttemptOutcome.TIMEOUT]: "timeout",
  [AttemptOutcome.CONNECTION]: "connection",
  [AttemptOutcome.TLS]: "tls",
  [AttemptOutcome.SSRF]: "ssrf",
  [AttemptOutcome.INVALID_RESPONSE]: "invalid-response",
  [AttemptOutcome.NOT_SENT]: "not-sent",
};

const STATE_NAMES: Record<DeliveryState, string> = {
  [DeliveryState.UNSPECIFIED]: "unknown",
  [DeliveryState.PENDING]: "pending",
  [DeliveryState.DELIVERED]: "delivered",
  [DeliveryState.RETRYING]: "retrying",
  [DeliveryState.DEAD_LETTER]: "dead-letter",
  [DeliveryState.FILTERED]: "filtered",
};

const DESTINATION_STATE_NAMES: Record<DestinationState, string> = {
  [DestinationState.UNSPECIFIED]: "unknown",
  [DestinationState.DELIVERING]: "delivering",
  [DestinationState.FAILING]: "failing",
  [DestinationState.PAUSED]: "paused",
  [DestinationState.AUTO_DISABLED]: "auto-disabled",
};

const BREAKER_NAMES: Record<BreakerState, string> = {
  [BreakerState.UNSPECIFIED]: "unknown",
  [BreakerState.CLOSED]: "closed",
  [BreakerState.OPEN]: "open",
  [BreakerState.HALF_OPEN]: "half-open",
};

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
    outcome: OUTCOME_NAMES[a.outcome] ?? "unknown",
    status: a.status,
    reason: a.reason,
    retryable: a.retryable,
    nextAttemptTime: iso(a.nextAttemptTime),
    responseBody: a.responseBody,
    requestBody: a.requestBody,
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
      state: STATE_NAMES[d.state] ?? "unknown",
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
    state: DESTINATION_STATE_NAMES[h.state] ?? "unknown",
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
    breaker: BREAKER_NAMES[h.breakerState] ?? "unknown",
    breakerOpenUntil: iso(h.breakerOpenUntil),
    breakerReplicas: h.breakerReplicas,
  };
}
