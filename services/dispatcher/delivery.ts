import type { AttemptLog, ConfigStore, DeadLetters, Logger } from "@hookpost/core";
import {
  deadRecordOf,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  SOURCE_ID_HEADER,
  startDeliverySpan,
  statusClass,
} from "@hookpost/core";
import type { JsMsg } from "nats";
import { attemptRecords, readableReason } from "./attempt-records.js";
import type { AutoDisabler } from "./auto-disable.js";
import type { DispatcherMetrics } from "./metrics.js";
import { logUrl } from "./redact-url.js";
import { type DeadCause, decide, type RetryPolicy } from "./retry.js";
import { type AttemptOutcome, notSentOutcome, type WebhookSender } from "./sender.js";

export interface DeliveryDeps {
  store: ConfigStore;
  sender: WebhookSender;
  deadLetters: DeadLetters;
  policy: RetryPolicy;
  ackWaitMs: number;
  metrics: DispatcherMetrics;
  logger: Logger;
  /** Every attempt is recorded here, without waiting. */
  attemptLog: AttemptLog;
  /** Aborted when shutdown's grace period is over: in-flight requests stop and are handed back. */
  shutdown: AbortSignal;
  /** Pauses destinations that are gone or failing too long (auto-disable.ts). */
  autoDisable?: AutoDisabler;
}

const decoder = new TextDecoder();

/**
 * Handles one message of a destination consumer: one attempt over the destination's URLs, then
 * ack (delivered), nak with a delay (retry later) or dead-letter. Retries are JetStream
 * redeliveries, so any replica may make the next attempt.
 */
export class DeliveryHandler {
  readonly #d: DeliveryDeps;

  constructor(deps: DeliveryDeps) {
    this.#d = deps;
  }

  async handle(destinationId: string, msg: JsMsg): Promise<void> {
    const d = this.#d;
    // Read at every attempt, so URL, header, secret and enabled changes apply to retries too.
    const dest = d.store.destination(destinationId);
    if (!dest) {
      // Deleted: its consumer and pending deliveries are being removed.
      msg.term();
      return;
    }
    if (!dest.enabled) {
      // Disabled after this was pulled: hand it back; it waits with the rest of the backlog.
      msg.nak();
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId });
      return;
    }
    // Read once: nats.js decodes headers and delivery info on access.
    const headers = msg.headers;
    const info = msg.info;
    const messageId = headers?.get(MESSAGE_ID_HEADER) || `seq-${msg.seq}`;
    const sourceId = headers?.get(SOURCE_ID_HEADER) ?? "";
    // Tracing hook: one span per attempt, under the trace the DELIVERIES headers carry.
    const span = startDeliverySpan(headers, destinationId, messageId, info.deliveryCount);
    // A long attempt (5 URLs x timeout) may outlast ack-wait: keep telling JetStream we're on it.
    const keepAlive = setInterval(() => msg.working(), Math.max(250, Math.floor(d.ackWaitMs / 3)));
    let result: Awaited<ReturnType<WebhookSender["deliver"]>>;
    const notRendered = headers?.get(NOT_RENDERED_HEADER);
    try {
      result = notRendered
        ? {
            delivered: false,
            outcomes: [
              notSentOutcome(dest.urls?.[0] ?? "", `the webhook body could not be rendered: ${notRendered}`),
            ],
          }
        : await d.sender.deliver(dest, msg.data, messageId, d.shutdown, span.context);
    } catch (err) {
      // Whatever stopped the request before it was sent (the sender turns what it foresees into
      // outcomes itself) is a failed attempt too: recorded, retried, dead-lettered at the window,
      // never the Puller's silent hand-back.
      result = { delivered: false, outcomes: [notSentOutcome(dest.urls?.[0] ?? "", preparationError(err))] };
    } finally {
      clearInterval(keepAlive);
    }
    for (const o of result.outcomes) {
      // Latency of requests only: one never sent has none.
      if (o.aborted || o.error === "not_sent") continue;
      const labels = { destination: destinationId, result: statusClass(o.status, o.error) };
      d.metrics.attemptSeconds.observe(labels, o.durationMs / 1000);
    }
    const facts = { messageId, destinationId, sourceId, attemptNumber: info.deliveryCount };
    const record = (nextAttemptMs?: number) => {
      if (!d.attemptLog.enabled) return;
      const f = nextAttemptMs === undefined ? facts : { ...facts, nextAttemptMs };
      for (const r of attemptRecords(f, result.outcomes)) d.attemptLog.attempt(r);
    };

    if (result.delivered) {
      d.autoDisable?.succeeded(destinationId);
      msg.ack();
      record();
      d.metrics.deliveries.inc({ outcome: "delivered", destination: destinationId });
      span.end("delivered");
      return;
    }
    if (d.shutdown.aborted || result.outcomes.some((o) => o.aborted)) {
      // Not the endpoint's fault: another replica takes it over at once.
      msg.nak();
      record();
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId });
      span.end("handed_back");
      return;
    }

    // Gone, or failing too long: the destination is paused and this call waits with its backlog.
    if (await d.autoDisable?.failed(dest, result)) {
      msg.nak();
      record();
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId });
      span.end("handed_back");
      return;
    }

    const retryAfters = result.outcomes.map((o) => o.retryAfterMs).filter((v) => v !== undefined);
    const decision = decide({
      attempt: info.deliveryCount,
      retryable: result.outcomes.some((o) => o.retryable),
      retryAfterMs: retryAfters.length > 0 ? Math.max(...retryAfters) : undefined,
      firstTimeMs: info.timestampNanos / 1e6,
      nowMs: Date.now(),
      policy: d.policy,
    });
    if (decision.action === "retry") {
      msg.nak(decision.delayMs);
      record(Date.now() + decision.delayMs);
      d.metrics.deliveries.inc({ outcome: "retry", destination: destinationId });
      d.metrics.retries.inc();
      span.end("retry", true);
      // One record per failed attempt, with what the last URL said (npm start prints it as a line).
      d.logger.info(
        {
          destinationId,
          messageId,
          attempt: info.deliveryCount,
          delayMs: decision.delayMs,
          ...lastOutcome(result.outcomes),
        },
        "delivery retry scheduled",
      );
      return;
    }
    record();
    // The rule that ended it, as the attempt log words it: "422 is not retried".
    const why = [...new Set(result.outcomes.map(readableReason))].join("; ");
    const reason = decision.cause === "not_retryable" ? why : `${decision.reason}; last: ${why}`;
    await this.#deadLetter(
      destinationId,
      msg,
      messageId,
      sourceId,
      result.outcomes,
      reason,
      decision.cause,
      notRendered,
    );
    span.end("dead_letter", true);
  }

  async #deadLetter(
    destinationId: string,
    msg: JsMsg,
    messageId: string,
    sourceId: string,
    outcomes: AttemptOutcome[],
    reason: string,
    cause: DeadCause,
    notRendered?: string,
  ): Promise<void> {
    const d = this.#d;
    const letter = {
      messageId,
      destinationId,
      sourceId,
      body: decoder.decode(msg.data),
      ...(notRendered ? { notRendered } : {}),
      attempts: msg.info.deliveryCount,
      outcomes: outcomes.map(({ url, status, error, detail }) => ({ url, status, error, detail })),
      reason,
      firstAttemptTime: new Date(msg.info.timestampNanos / 1e6).toISOString(),
      deadTime: new Date().toISOString(),
    };
    let deadSequence: number;
    try {
      deadSequence = await d.deadLetters.record(letter, `${destinationId}:${msg.seq}`);
    } catch (err) {
      // Never drop: without a record the delivery stays and is tried again.
      d.logger.error({ destinationId, messageId, err: (err as Error).message }, "dead-letter write failed");
      msg.nak(5000);
      return;
    }
    msg.ack();
    d.attemptLog.dead(deadRecordOf(letter, deadSequence));
    d.metrics.deliveries.inc({ outcome: "dead_letter", destination: destinationId });
    d.metrics.deadLetters.inc({ cause });
    d.logger.warn(
      { destinationId, messageId, attempts: msg.info.deliveryCount, reason, ...lastOutcome(outcomes) },
      "delivery dead-lettered",
    );
  }
}

/** What went wrong preparing a request, without a stack (an error's message names no secret). */
function preparationError(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.slice(0, 300);
}

/** Log fields of the last URL tried: where, what came back, the start of its body. */
function lastOutcome(outcomes: AttemptOutcome[]): Record<string, unknown> {
  const o = outcomes.at(-1);
  if (!o) return {};
  return {
    url: logUrl(o.url),
    status: o.status,
    error: o.error,
    detail: o.detail,
    response: o.responseExcerpt ? o.responseExcerpt.slice(0, 200) : undefined,
  };
}
