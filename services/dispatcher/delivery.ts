import { setTimeout as sleep } from "node:timers/promises";
import { formatDuration } from "@hookpost/contract";
import type { AttemptLog, ConfigStore, DeadLetters, Logger } from "@hookpost/core";
import {
  deadRecordOf,
  FIRST_TIME_HEADER,
  isStreamFull,
  laneSubject,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  prepareBatchRequests,
  recordFields,
  SOURCE_ID_HEADER,
  startDeliverySpan,
  targetId,
} from "@hookpost/core";
import type { JsMsg } from "nats";
import {
  attemptRecorder,
  attemptRecords,
  lastOutcome,
  readableReason,
  readableReasons,
} from "./attempt-records.js";
import type { AutoDisabler } from "./auto-disable.js";
import { DirectMsg, deadLetterKey } from "./direct.js";
import type { DispatcherMetrics } from "./metrics.js";
import { type DeliveryState, deliveryState, type Parking } from "./parking.js";
import { type DeadCause, decideAfterAttempt, policyFor, type RetryPolicy } from "./retry.js";
import { observeLatency, sendAttempt } from "./send-attempt.js";
import {
  type AttemptOutcome,
  type DeliveryResult,
  filteredOutcome,
  notSentOutcome,
  type WebhookSender,
} from "./sender.js";

/** A delivery that is part of a batch: its message, state, ids and rendered element. */
export interface BatchMember {
  msg: JsMsg;
  state: DeliveryState;
  messageId: string;
  sourceId: string;
  /** The call's body as the destination renders it (mapping), JSON text. */
  element: Uint8Array;
}

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
  /** Moves a delivery to its destination's lane (retries, pauses). */
  parking: Parking;
  /** Told whether each attempt was answered, timed out, or failed (breaker.ts, capacity.ts). */
  health: AttemptObserver;
}

/** Who learns how an attempt went: the breakers and slow start. */
export interface AttemptObserver {
  /** The endpoint answered (2xx, or a status it chose that is not retried) after `ms`. */
  answered(destinationId: string, ms: number): void;
  /**
   * A timeout or retryable failure; `stalled`: a timeout or a failed connection; `reason` as
   * read; `ms`: how long the last request took.
   */
  failed(destinationId: string, stalled: boolean, reason: string, ms: number): void;
  /** Cut short (shutdown) or not sent: says nothing about the endpoint. */
  released(destinationId: string): void;
}

const decoder = new TextDecoder();
/** A park that failed (DELIVERIES full, NATS away) is tried again after this. */
const PARK_FAILED_DELAY_MS = 2000;
/** A lane delivery that would be parked unchanged on its own lane comes again after this. */
const STAY_ON_LANE_MS = 1000;
/** Publishes of one park before the message is handed back (about a minute of backoff). */
const PARK_ATTEMPTS = 40;

/**
 * `firstTimeMs` for the records of a parked delivery (a retry, a call that waited on a paused
 * destination or an open breaker: parking sets FIRST_TIME_HEADER), so that a late attempt's records
 * are erased with their call (attempt-records.ts); a fresh delivery's records need none.
 */
function parkedSince(
  headers: { has(name: string): boolean } | undefined,
  state: DeliveryState,
): { firstTimeMs?: number } {
  return headers?.has(FIRST_TIME_HEADER) ? { firstTimeMs: state.firstTimeMs } : {};
}

/**
 * Makes one attempt of a delivery (a message of a partition or of a lane) over the destination's
 * URLs, then acks it (delivered), parks it on its lane with the attempt counted and a due time
 * (retry later), or dead-letters it. The attempt count and first-stored time travel in the
 * message's headers (parking.ts), so any replica may make the next attempt.
 */
export class DeliveryHandler {
  readonly #d: DeliveryDeps;

  constructor(deps: DeliveryDeps) {
    this.#d = deps;
  }

  /** Parks the delivery unchanged (a paused destination, no slot, an open breaker); false when not stored. */
  async park(
    destinationId: string,
    msg: JsMsg,
    state = deliveryState(msg),
    dueMs = 0,
    batch?: string,
  ): Promise<boolean> {
    const d = this.#d;
    if (!d.store.destination(destinationId)) {
      // Deleted meanwhile: parking would outlive the purge of its deliveries.
      msg.term();
      return false;
    }
    if (
      msg.subject === laneSubject(destinationId) &&
      state.attempts === deliveryState(msg).attempts &&
      batch === undefined
    ) {
      // Already on its lane, unchanged: its copy would carry the same Nats-Msg-Id, which
      // JetStream drops as a duplicate, and acking this one would lose the delivery. It stays.
      msg.nak(Math.max(STAY_ON_LANE_MS, dueMs - Date.now()));
      return true;
    }
    // A publish that timed out may still have been stored: trying again with the same
    // Nats-Msg-Id is stored once, whereas handing the message back could let it be delivered
    // beside its parked copy (a duplicate). So: try again until stored, holding the message.
    const stop = setInterval(() => msg.working(), Math.max(250, Math.floor(d.ackWaitMs / 3)));
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await d.parking.park(destinationId, msg, state.attempts, dueMs, state, batch);
          break;
        } catch (err) {
          // Full (refused, so not stored), or shutting down: hand it back; it comes again later.
          if (isStreamFull(err) || d.shutdown.aborted || attempt >= PARK_ATTEMPTS) {
            d.logger.warn(
              { destinationId, err: (err as Error).message },
              "parking a delivery failed; handed back",
            );
            msg.nak(PARK_FAILED_DELAY_MS);
            return false;
          }
          await sleep(Math.min(2000, 100 * attempt), undefined, { ref: false });
        }
      }
    } finally {
      clearInterval(stop);
    }
    msg.ack();
    return true;
  }

  /**
   * The retry window ended while the delivery waited without an attempt (its destination's
   * breaker open): dead-lettered now, with the last failure the replica saw.
   */
  async expire(
    destinationId: string,
    msg: JsMsg,
    state: DeliveryState,
    last: string | undefined,
  ): Promise<void> {
    const headers = msg.headers;
    const notRendered = headers?.get(NOT_RENDERED_HEADER);
    const window = formatDuration(this.#d.policy.windowMs);
    await this.#deadLetter(destinationId, msg, state, {
      messageId: headers?.get(MESSAGE_ID_HEADER) || `seq-${msg.seq}`,
      sourceId: headers?.get(SOURCE_ID_HEADER) ?? "",
      outcomes: [],
      reason: `retry window of ${window} exhausted while the circuit breaker was open${last ? `; last: ${last}` : ""}`,
      cause: "window_exhausted",
      ...(notRendered ? { notRendered } : {}),
    });
  }

  /**
   * A test call (AdminService.SendTestCall): one attempt now, recorded, then acknowledged; never
   * retried or dead-lettered, and not counted towards auto-disable (the operator is trying).
   */
  async test(destinationId: string, msg: JsMsg): Promise<void> {
    const d = this.#d;
    const dest = d.store.destination(destinationId);
    if (!dest) {
      msg.term();
      return;
    }
    const headers = msg.headers;
    const messageId = headers?.get(MESSAGE_ID_HEADER) || `seq-${msg.seq}`;
    const sourceId = headers?.get(SOURCE_ID_HEADER) ?? "";
    const span = startDeliverySpan(headers, destinationId, messageId, 1);
    // FAN_OUT: every URL gets the test call, as every call (its targets, shaping.md 7.2).
    const targets =
      dest.deliveryMode === "FAN_OUT"
        ? dest.urls.flatMap((_, i) => d.store.destination(targetId(destinationId, i)) ?? [])
        : [dest];
    const results: { target: string; result: DeliveryResult }[] = [];
    for (const target of targets) {
      const result = await sendAttempt(
        d.sender,
        target,
        { data: msg.data, messageId, sourceId, notRendered: undefined },
        d.shutdown,
        span.context,
      );
      results.push({ target: target.id, result });
    }
    if (d.shutdown.aborted || results.some((r) => r.result.outcomes.some((o) => o.aborted))) {
      msg.nak();
      span.end("handed_back");
      return;
    }
    for (const { target, result } of results) {
      observeLatency(d.metrics, target, result);
      attemptRecorder(
        d.attemptLog,
        // The call's user, type and event, as any call's (a test call may name a real user).
        { messageId, destinationId: target, sourceId, attemptNumber: 1, ...recordFields(headers) },
        result.outcomes,
      )();
    }
    msg.ack();
    d.metrics.deliveries.inc({ outcome: "test", destination: destinationId });
    const delivered = results.every((r) => r.result.delivered);
    span.end(delivered ? "delivered" : "test_failed", !delivered);
  }

  async handle(destinationId: string, msg: JsMsg, state: DeliveryState = deliveryState(msg)): Promise<void> {
    const d = this.#d;
    // Read at every attempt, so URL, header, secret and enabled changes apply to retries too.
    const dest = d.store.destination(destinationId);
    if (!dest) {
      // Deleted: its consumer and pending deliveries are being removed.
      msg.term();
      return;
    }
    if (!dest.enabled) {
      // Disabled after this was pulled: it waits on its lane with the rest of the backlog.
      await this.park(destinationId, msg, state);
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId });
      return;
    }
    const attemptNumber = state.attempts + 1;
    // Read once: nats.js decodes headers on access.
    const headers = msg.headers;
    const messageId = headers?.get(MESSAGE_ID_HEADER) || `seq-${msg.seq}`;
    const sourceId = headers?.get(SOURCE_ID_HEADER) ?? "";
    // Tracing hook: one span per attempt, under the trace the DELIVERIES headers carry.
    const span = startDeliverySpan(headers, destinationId, messageId, attemptNumber);
    // A long attempt (5 URLs x timeout) may outlast ack-wait: keep telling JetStream we're on it.
    // (A direct attempt's call is kept alive by Deliveries.direct, one timer for all of them.)
    const keepAlive =
      msg instanceof DirectMsg
        ? undefined
        : setInterval(() => msg.working(), Math.max(250, Math.floor(d.ackWaitMs / 3)));
    let result: Awaited<ReturnType<WebhookSender["deliver"]>>;
    const notRendered = headers?.get(NOT_RENDERED_HEADER);
    try {
      result = await sendAttempt(
        d.sender,
        dest,
        { data: msg.data, messageId, sourceId, notRendered },
        d.shutdown,
        span.context,
      );
    } finally {
      clearInterval(keepAlive);
    }
    observeLatency(d.metrics, destinationId, result);
    // A direct attempt's fields come from the router, not back from the headers it just wrote.
    const fields = msg instanceof DirectMsg ? msg.fields : recordFields(headers);
    const facts = {
      messageId,
      destinationId,
      sourceId,
      attemptNumber,
      ...fields,
      ...parkedSince(headers, state),
    };
    this.#observe(destinationId, result.outcomes);
    const record = attemptRecorder(d.attemptLog, facts, result.outcomes);

    if (result.delivered) {
      // Filtered now (the filter changed while it waited): done, but says nothing of the endpoint.
      if (result.filtered === undefined) d.autoDisable?.succeeded(destinationId);
      // A direct attempt's record may go in its call's routing record (one message): kept first.
      // (The router asks for it only while the log is on.)
      const kept =
        msg instanceof DirectMsg && msg.keepsRecord && msg.keep(attemptRecords(facts, result.outcomes));
      msg.ack();
      if (!kept) record();
      const outcome = result.filtered === undefined ? "delivered" : "filtered";
      d.metrics.deliveries.inc({ outcome, destination: destinationId });
      span.end(outcome);
      return;
    }
    if (d.shutdown.aborted || result.outcomes.some((o) => o.aborted)) {
      // Not the endpoint's fault: another replica takes it over at once, the attempt uncounted.
      msg.nak();
      record();
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId });
      span.end("handed_back");
      return;
    }

    // Gone, or failing too long: the destination is paused and this call waits with its backlog.
    if (await d.autoDisable?.failed(dest, result)) {
      await this.park(destinationId, msg, { ...state, attempts: attemptNumber });
      record();
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId });
      span.end("handed_back");
      return;
    }

    const decision = decideAfterAttempt(result.outcomes, {
      attempt: attemptNumber,
      firstTimeMs: state.firstTimeMs,
      policy: policyFor(d.policy, dest),
    });
    if (decision.action === "retry") {
      const due = Date.now() + decision.delayMs;
      if (!(await this.park(destinationId, msg, { ...state, attempts: attemptNumber }, due))) {
        span.end("retry", true);
        return;
      }
      record(due);
      d.metrics.deliveries.inc({ outcome: "retry", destination: destinationId });
      d.metrics.retries.inc();
      span.end("retry", true);
      // One record per failed attempt, with what the last URL said (npm start prints it as a line).
      d.logger.info(
        {
          destinationId,
          messageId,
          attempt: attemptNumber,
          delayMs: decision.delayMs,
          ...lastOutcome(result.outcomes),
        },
        "delivery retry scheduled",
      );
      return;
    }
    record();
    // The rule that ended it, as the attempt log words it: "422 is not retried".
    const why = readableReasons(result.outcomes);
    const reason = decision.cause === "not_retryable" ? why : `${decision.reason}; last: ${why}`;
    await this.#deadLetter(
      destinationId,
      msg,
      { ...state, attempts: attemptNumber },
      {
        messageId,
        sourceId,
        outcomes: result.outcomes,
        reason,
        cause: decision.cause,
        ...(notRendered === undefined ? {} : { notRendered }),
      },
    );
    span.end("dead_letter", true);
  }

  /**
   * One attempt of a batch (docs/design/shaping.md section 7.1): one request carrying every
   * member's element, then each member acked, parked again with the batch's key (retried as a
   * unit) or dead-lettered on its own. The caller holds the destination's slot.
   */
  async handleBatch(destinationId: string, members: readonly BatchMember[], key: string): Promise<void> {
    const d = this.#d;
    const dest = d.store.destination(destinationId);
    if (!dest) {
      for (const m of members) m.msg.term();
      return;
    }
    if (!dest.enabled) {
      // Paused after they were pulled: they wait on the lane with the rest of the backlog.
      await Promise.all(members.map((m) => this.park(destinationId, m.msg, m.state)));
      d.metrics.deliveries.inc({ outcome: "handed_back", destination: destinationId }, members.length);
      return;
    }
    const first = members[0]!;
    const span = startDeliverySpan(first.msg.headers, destinationId, key, first.state.attempts + 1);
    let result: DeliveryResult;
    try {
      const requests = prepareBatchRequests(
        dest,
        members.map((m) => m.element),
        key,
      );
      result = await d.sender.send(dest, requests, key, d.shutdown, span.context);
    } catch (err) {
      const why = err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 300) : String(err);
      result = { delivered: false, outcomes: [notSentOutcome(dest.urls?.[0] ?? "", why)] };
    }
    observeLatency(d.metrics, destinationId, result);
    this.#observe(destinationId, result.outcomes);
    // Each member's attempt record says which request carried it.
    const outcomes = result.outcomes.map((o) => ({
      ...o,
      detail: `${o.detail ? `${o.detail}; ` : ""}batch ${key} of ${members.length}`,
    }));
    const recorders = members.map((m) => this.#memberRecorder(destinationId, m, outcomes));
    const count = (outcome: string, n = members.length) =>
      d.metrics.deliveries.inc({ outcome, destination: destinationId }, n);
    // Every member settled alike: each recorded, the batch counted and its span ended once.
    const settleAll = (outcome: "delivered" | "handed_back", settle: (m: BatchMember) => void) => {
      for (const [i, m] of members.entries()) {
        settle(m);
        recorders[i]!();
      }
      count(outcome);
      span.end(outcome);
    };

    if (result.delivered) {
      d.autoDisable?.succeeded(destinationId);
      settleAll("delivered", (m) => m.msg.ack());
      return;
    }
    if (d.shutdown.aborted || result.outcomes.some((o) => o.aborted)) {
      settleAll("handed_back", (m) => m.msg.nak());
      return;
    }
    if (await d.autoDisable?.failed(dest, result)) {
      await Promise.all(
        members.map((m) => this.park(destinationId, m.msg, { ...m.state, attempts: m.state.attempts + 1 })),
      );
      settleAll("handed_back", () => {});
      return;
    }
    const policy = policyFor(d.policy, dest);
    const decisions = members.map((m) =>
      decideAfterAttempt(result.outcomes, {
        attempt: m.state.attempts + 1,
        firstTimeMs: m.state.firstTimeMs,
        policy,
      }),
    );
    // One due time for the batch, so its members come back together and go as one again.
    const delays = decisions.flatMap((x) => (x.action === "retry" ? [x.delayMs] : []));
    const due = Date.now() + (delays.length > 0 ? Math.max(...delays) : 0);
    const retrying = members.filter((_, i) => decisions[i]!.action === "retry");
    const why = readableReasons(result.outcomes);
    await Promise.all(
      members.map(async (m, i) => {
        const decision = decisions[i]!;
        const state = { ...m.state, attempts: m.state.attempts + 1 };
        if (decision.action === "retry") {
          const batch = `${key};${retrying.indexOf(m)};${retrying.length}`;
          if (await this.park(destinationId, m.msg, state, due, batch)) recorders[i]!(due);
          return;
        }
        recorders[i]!();
        await this.#deadLetter(destinationId, m.msg, state, {
          messageId: m.messageId,
          sourceId: m.sourceId,
          outcomes: result.outcomes,
          reason: `${decision.cause === "not_retryable" ? why : `${decision.reason}; last: ${why}`} (batch ${key} of ${members.length})`,
          cause: decision.cause,
        });
      }),
    );
    if (retrying.length > 0) {
      count("retry", retrying.length);
      d.metrics.retries.inc(retrying.length);
      d.logger.info(
        {
          destinationId,
          batch: key,
          calls: retrying.length,
          attempt: retrying[0]!.state.attempts + 1,
          delayMs: due - Date.now(),
          ...lastOutcome(result.outcomes),
        },
        "batch retry scheduled",
      );
    }
    span.end(retrying.length > 0 ? "retry" : "dead_letter", true);
  }

  /**
   * A member that cannot join a batch (its element did not render): an attempt of its own that
   * sent nothing, then parked for a retry or dead-lettered, as any failed attempt.
   */
  async failAlone(destinationId: string, member: Omit<BatchMember, "element">, why: string): Promise<void> {
    const d = this.#d;
    const dest = d.store.destination(destinationId);
    if (!dest) {
      member.msg.term();
      return;
    }
    const outcomes = [notSentOutcome(dest.urls?.[0] ?? "", why)];
    const attempt = member.state.attempts + 1;
    const state = { ...member.state, attempts: attempt };
    const record = this.#memberRecorder(destinationId, member, outcomes);
    const decision = decideAfterAttempt(outcomes, {
      attempt,
      firstTimeMs: member.state.firstTimeMs,
      policy: policyFor(d.policy, dest),
    });
    if (decision.action === "retry") {
      const due = Date.now() + decision.delayMs;
      if (await this.park(destinationId, member.msg, state, due)) record(due);
      return;
    }
    record();
    await this.#deadLetter(destinationId, member.msg, state, {
      messageId: member.messageId,
      sourceId: member.sourceId,
      outcomes,
      reason: `${decision.reason}; last: ${readableReasons(outcomes)}`,
      cause: decision.cause,
    });
  }

  /** A member the destination's filter refuses now: done, recorded as filtered. */
  filtered(destinationId: string, member: Omit<BatchMember, "element">, reason: string): void {
    const d = this.#d;
    member.msg.ack();
    this.#memberRecorder(destinationId, member, [filteredOutcome(reason)])();
    d.metrics.deliveries.inc({ outcome: "filtered", destination: destinationId });
  }

  /** Records one batch member's attempt (its own ids, the batch's outcomes). */
  #memberRecorder(
    destinationId: string,
    m: Omit<BatchMember, "element">,
    outcomes: readonly AttemptOutcome[],
  ): (nextAttemptMs?: number) => void {
    const facts = {
      messageId: m.messageId,
      destinationId,
      sourceId: m.sourceId,
      attemptNumber: m.state.attempts + 1,
      ...recordFields(m.msg.headers),
      ...parkedSince(m.msg.headers, m.state),
    };
    return attemptRecorder(this.#d.attemptLog, facts, outcomes);
  }

  /** Tells the breakers and slow start how the attempt went. */
  #observe(destinationId: string, outcomes: AttemptOutcome[]): void {
    const h = this.#d.health;
    const last = outcomes.at(-1);
    if (!last || last.aborted || last.error === "not_sent" || last.error === "filtered")
      h.released(destinationId);
    else if (last.ok || !last.retryable) h.answered(destinationId, last.durationMs);
    else {
      const stalled = outcomes.some((o) => o.error === "timeout" || o.error === "connection");
      h.failed(destinationId, stalled, readableReason(last), last.durationMs);
    }
  }

  async #deadLetter(
    destinationId: string,
    msg: JsMsg,
    state: DeliveryState,
    why: {
      messageId: string;
      sourceId: string;
      outcomes: AttemptOutcome[];
      reason: string;
      cause: DeadCause;
      notRendered?: string;
    },
  ): Promise<void> {
    const d = this.#d;
    const { messageId, sourceId, outcomes, reason, cause, notRendered } = why;
    const letter = {
      messageId,
      destinationId,
      sourceId,
      body: decoder.decode(msg.data),
      ...(notRendered ? { notRendered } : {}),
      attempts: state.attempts,
      outcomes: outcomes.map(({ url, status, error, detail }) => ({ url, status, error, detail })),
      reason,
      firstAttemptTime: new Date(state.firstTimeMs).toISOString(),
      deadTime: new Date().toISOString(),
      ...recordFields(msg.headers),
    };
    let deadSequence: number;
    try {
      deadSequence = await d.deadLetters.record(letter, deadLetterKey(destinationId, msg));
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
      { destinationId, messageId, attempts: state.attempts, reason, ...lastOutcome(outcomes) },
      "delivery dead-lettered",
    );
  }
}
