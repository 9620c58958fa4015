import type { AttemptLog, DeadLetters, DestinationRecord, Logger } from "@hookpost/core";
import {
  deadRecordOf,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  recordFields,
  SOURCE_ID_HEADER,
  startDeliverySpan,
} from "@hookpost/core";
import type { StoredMsg } from "nats";
import { attemptRecorder, lastOutcome, readableReasons } from "../attempt-records.js";
import type { AutoDisabler } from "../auto-disable.js";
import type { DispatcherMetrics } from "../metrics.js";
import { type DeadCause, decideAfterAttempt, policyFor, type RetryPolicy } from "../retry.js";
import { observeLatency, sendAttempt } from "../send-attempt.js";
import type { AttemptOutcome, WebhookSender } from "../sender.js";

export interface AttemptDeps {
  sender: WebhookSender;
  deadLetters: DeadLetters;
  attemptLog: AttemptLog;
  metrics: DispatcherMetrics;
  logger: Logger;
  policy: RetryPolicy;
  autoDisable: AutoDisabler;
}

/** What one attempt at a head came to; the worker acts on it (delete, wait, retry). */
export type HeadOutcome =
  | { kind: "delivered" }
  /** Cut short by shutdown: the head stays stored for the next owner. */
  | { kind: "aborted" }
  /** The destination is being paused (410, failing too long): the head waits with the rest. */
  | { kind: "paused" }
  | { kind: "retry"; delayMs: number }
  /** Dead-lettered (recorded): the head may be removed. */
  | { kind: "dead" }
  /** The dead letter could not be written: try the head again later, never drop it. */
  | { kind: "dead_failed" };

const decoder = new TextDecoder();

/** The stored facts of a head the records need. */
export function headFacts(head: StoredMsg, destinationId: string) {
  return {
    messageId: head.header?.get(MESSAGE_ID_HEADER) || `ordered-seq-${head.seq}`,
    sourceId: head.header?.get(SOURCE_ID_HEADER) ?? "",
    destinationId,
    firstTimeMs: head.time.getTime(),
    ...recordFields(head.header),
  };
}

/**
 * One attempt at the head of a user's subject: the request over the destination's URLs, the
 * attempt records and metrics, and the decision (retry from the stored time, or dead-letter).
 */
export async function attemptHead(
  d: AttemptDeps,
  dest: DestinationRecord,
  head: StoredMsg,
  attempt: number,
  signal: AbortSignal,
): Promise<HeadOutcome> {
  const f = headFacts(head, dest.id);
  const span = startDeliverySpan(head.header, dest.id, f.messageId, attempt);
  const call = {
    data: head.data,
    messageId: f.messageId,
    sourceId: f.sourceId,
    notRendered: head.header?.get(NOT_RENDERED_HEADER),
  };
  const result = await sendAttempt(d.sender, dest, call, signal, span.context);
  observeLatency(d.metrics, dest.id, result);
  const record = attemptRecorder(d.attemptLog, { ...f, attemptNumber: attempt }, result.outcomes);
  const count = (outcome: string) => d.metrics.deliveries.inc({ outcome, destination: dest.id });

  if (result.delivered) {
    // Filtered now (the filter changed while it waited): done, but says nothing of the endpoint.
    if (result.filtered === undefined) d.autoDisable.succeeded(dest.id);
    record();
    const outcome = result.filtered === undefined ? "delivered" : "filtered";
    count(outcome);
    span.end(outcome);
    return { kind: "delivered" };
  }
  if (signal.aborted || result.outcomes.some((o) => o.aborted)) {
    record();
    count("handed_back");
    span.end("handed_back");
    return { kind: "aborted" };
  }
  if (await d.autoDisable.failed(dest, result)) {
    record();
    count("handed_back");
    span.end("handed_back");
    return { kind: "paused" };
  }
  const decision = decideAfterAttempt(result.outcomes, {
    attempt,
    firstTimeMs: f.firstTimeMs,
    policy: policyFor(d.policy, dest),
  });
  if (decision.action === "retry") {
    record(Date.now() + decision.delayMs);
    count("retry");
    d.metrics.retries.inc();
    span.end("retry", true);
    d.logger.info(
      {
        destinationId: dest.id,
        messageId: f.messageId,
        attempt,
        delayMs: decision.delayMs,
        ordered: true,
        ...lastOutcome(result.outcomes),
      },
      "delivery retry scheduled",
    );
    return { kind: "retry", delayMs: decision.delayMs };
  }
  record();
  const why = readableReasons(result.outcomes);
  const reason = decision.cause === "not_retryable" ? why : `${decision.reason}; last: ${why}`;
  span.end("dead_letter", true);
  const ok = await deadLetterHead(d, dest.id, head, attempt, result.outcomes, reason, decision.cause);
  return ok ? { kind: "dead" } : { kind: "dead_failed" };
}

/** Records a head as a dead letter (deduplicated per stored message); false when the write failed. */
export async function deadLetterHead(
  d: Pick<AttemptDeps, "deadLetters" | "attemptLog" | "metrics" | "logger">,
  destinationId: string,
  head: StoredMsg,
  attempts: number,
  outcomes: readonly AttemptOutcome[],
  reason: string,
  cause: DeadCause | "disabled",
): Promise<boolean> {
  const f = headFacts(head, destinationId);
  const notRendered = head.header?.get(NOT_RENDERED_HEADER) || undefined;
  const letter = {
    messageId: f.messageId,
    destinationId,
    sourceId: f.sourceId,
    body: decoder.decode(head.data),
    ...(notRendered ? { notRendered } : {}),
    attempts,
    outcomes: outcomes.map(({ url, status, error, detail }) => ({ url, status, error, detail })),
    reason,
    firstAttemptTime: head.time.toISOString(),
    deadTime: new Date().toISOString(),
    ...recordFields(head.header),
  };
  let deadSequence: number;
  try {
    deadSequence = await d.deadLetters.record(letter, `${destinationId}:ordered:${head.seq}`);
  } catch (err) {
    d.logger.error(
      { destinationId, messageId: f.messageId, err: (err as Error).message },
      "dead-letter write failed",
    );
    return false;
  }
  d.attemptLog.dead(deadRecordOf(letter, deadSequence));
  d.metrics.deliveries.inc({ outcome: "dead_letter", destination: destinationId });
  if (cause !== "disabled") d.metrics.deadLetters.inc({ cause });
  // The janitor's words for a paused destination's expired call; npm start prints both.
  const msg =
    cause === "disabled" ? "delivery of a disabled destination dead-lettered" : "delivery dead-lettered";
  d.logger.warn(
    { destinationId, messageId: f.messageId, attempts, reason, ordered: true, ...lastOutcome(outcomes) },
    msg,
  );
  return true;
}
