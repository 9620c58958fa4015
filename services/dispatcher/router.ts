import { consentDecision, isEventType, type StoredCall } from "@hookpost/contract";
import type {
  AttemptLog,
  AttemptRecord,
  ConfigStore,
  ConsentFiltered,
  DestinationRecord,
  Logger,
  PipelinedPublisher,
  RoutedRecord,
} from "@hookpost/core";
import {
  ATTR,
  bodyObject,
  callRecordFields,
  countIfFull,
  DELIVERIES_STREAM,
  deliveryMsgId,
  deliveryPartition,
  EVENT_SEQ_HEADER,
  erasable,
  filterExpressionPasses,
  filterListsOf,
  laneSubject,
  loggedEvent,
  MapHeaders,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  orderedSubject,
  partitionOf,
  partitionSubject,
  renderBody,
  SOURCE_ID_HEADER,
  setCallHeaders,
  startRouteSpan,
  targetId,
  USER_HASH_HEADER,
  userHash,
} from "@hookpost/core";
import type { JsMsg } from "nats";
import { type DirectEnd, DirectMsg, mayGoDirect } from "./direct.js";
import { webhooksEnabled } from "./integrations.js";
import type { DispatcherMetrics } from "./metrics.js";

export interface RouterDeps {
  /** Fan-out publishes: PubAck awaited, many in flight, written together per event-loop turn. */
  publisher: PipelinedPublisher;
  store: ConfigStore;
  metrics: DispatcherMetrics;
  logger: Logger;
  /** Where each call went (or why nowhere) is recorded here, without waiting. */
  attemptLog?: AttemptLog;
  /** ORDERED_PARTITIONS: PER_USER destinations' calls go to ORDERED under `partitionOf(dest, this)`. */
  orderedPartitions: number;
  /**
   * DELIVERY_PARTITIONS: the others go to `deliveryPartition(...)` of DELIVERIES: a call's fan-out
   * and a destination's calls both spread over every partition of their class.
   */
  deliveryPartitions: number;
  /**
   * Whether this replica knows the destination to answer (delivery core): its calls go to the
   * partitions hung or new destinations never use. Absent: every destination is unknown.
   */
  answering?: (destinationId: string) => boolean;
  /**
   * A batching destination's calls go straight to its lane (docs/design/shaping.md 7.1): told so
   * that this replica opens the lane at once rather than at the next sweep.
   */
  onLane?: (destinationId: string) => void;
  /**
   * The first attempt made here, when the destination may take it now (design §6): how it
   * ended, or undefined when the delivery is to be stored on DELIVERIES.
   */
  direct?: (destinationId: string, make: () => DirectMsg) => Promise<DirectEnd | undefined>;
}

/** Wait before a call is routed again when DELIVERIES refused it (full, or NATS trouble). */
const BACKPRESSURE_DELAY_MS = 2000;
const decoder = new TextDecoder();
/** JetStream's dedup header: a redelivered call's fan-out is stored once. */
const NATS_MSG_ID = "Nats-Msg-Id";

/**
 * Fans each stored call out to its destinations: one message per destination on DELIVERIES,
 * carrying the rendered body. The call is acked only after every fan-out message is stored;
 * a redelivered call publishes the same Nats-Msg-Ids, which JetStream deduplicates.
 * A destination whose consent categories the call does not grant (contract's consentDecision;
 * never a deletion notice) gets no message; the routed record says why.
 */
export class Router {
  readonly #d: RouterDeps;

  constructor(deps: RouterDeps) {
    this.#d = deps;
  }

  async handle(msg: JsMsg): Promise<void> {
    const d = this.#d;
    const call = parseStoredCall(msg.data);
    if (typeof call === "string") {
      // Cannot be routed, now or ever. Log where it was, never its content (it may hold PII).
      d.logger.error({ seq: msg.seq, subject: msg.subject, problem: call }, "unreadable event dropped");
      msg.term();
      d.metrics.routed.inc({ outcome: "invalid" });
      return;
    }
    // Tracing hook: a route span under the call's trace (EVENTS headers), ended with the outcome.
    const span = startRouteSpan(msg.headers, call);
    if (!webhooksEnabled(call)) {
      msg.ack();
      this.#record(
        call,
        d.store.destinationsForSource(call.sourceId).map((dest) => dest.id),
        true,
      );
      d.metrics.routed.inc({ outcome: "filtered" });
      span.end("filtered");
      return;
    }
    const connected = d.store.destinationsForSource(call.sourceId);
    if (connected.length === 0) {
      msg.ack();
      this.#record(call, [], false);
      d.metrics.routed.inc({ outcome: "no_destination" });
      span.end("no_destination");
      return;
    }
    const { targets, consentFiltered } = await byConsentAndFilter(call, connected);
    if (targets.length === 0) {
      // Every destination requires consent the call does not grant: filtered, as by integrations.
      msg.ack();
      this.#record(call, [], false, undefined, consentFiltered);
      d.metrics.routed.inc({ outcome: "filtered" });
      span.end("filtered");
      return;
    }
    // Erasure finds a user's deliveries by this (never a deletion notice: it must reach them all).
    // Hashed once per call: the headers, ordered subjects and the routed record all use it.
    let hashed: string | undefined;
    const hashOfUser = () => (hashed ??= userHash(call));
    const user = erasable(call) ? hashOfUser() : undefined;
    let body: string | Uint8Array;
    let notRendered: string | undefined;
    try {
      body = renderBody(call);
    } catch (err) {
      // Accepted, so never dropped: each destination gets the stored call, marked, and the
      // dispatcher records the failure and dead-letters it at the retry window (delivery.ts).
      // One line: it travels as a NATS header.
      notRendered = (err instanceof Error ? err.message : String(err)).replace(/[\r\n]+/g, " ").slice(0, 300);
      body = msg.data;
      d.logger.error(
        { seq: msg.seq, messageId: call.messageId, err: notRendered },
        "webhook body not rendered",
      );
    }
    const delivering = deliveryTargets(targets, d.store);
    // A call with one delivery target, nothing filtered: a direct attempt that delivers it keeps
    // its record, written below with the routing record as one message (AttemptLog.delivered).
    const oneRecord =
      delivering.length === 1 &&
      delivering[0] === targets[0] &&
      consentFiltered.length === 0 &&
      notRendered === undefined &&
      d.attemptLog?.enabled === true;
    let direct: DirectMsg | undefined;
    // A call routed again (a fan-out that failed, an ack lost to an election) may have stored a
    // destination's delivery already: only the store path is deduplicated (Nats-Msg-Id), so a
    // call that came back never goes direct.
    const attemptDirect = msg.info.redelivered ? undefined : d.direct;
    try {
      await Promise.all(
        delivering.map((dest) => {
          const h = new MapHeaders();
          h.set(NATS_MSG_ID, deliveryMsgId(call.sourceId, call.messageId, dest.id));
          h.set(MESSAGE_ID_HEADER, call.messageId);
          h.set(SOURCE_ID_HEADER, call.sourceId);
          if (notRendered !== undefined) h.set(NOT_RENDERED_HEADER, notRendered);
          if (user !== undefined) h.set(USER_HASH_HEADER, user);
          setCallHeaders(h, call);
          span.inject(h); // tracing hook: the trace goes on to DELIVERIES
          const ordered = dest.ordering === "PER_USER";
          // The accepted order, which the ordered worker follows even if routers store out of it.
          if (ordered) h.set(EVENT_SEQ_HEADER, String(msg.info.streamSequence));
          const subject = ordered
            ? orderedSubject(partitionOf(dest.id, d.orderedPartitions), dest.id, hashOfUser())
            : dest.batching
              ? laneSubject(dest.id)
              : partitionSubject(
                  deliveryPartition(
                    dest.id,
                    call.messageId,
                    d.deliveryPartitions,
                    d.answering?.(dest.id) ?? false,
                  ),
                  dest.id,
                );
          const store = () =>
            d.publisher.publish(subject, body, h).then(() => {
              if (dest.batching && !ordered) d.onLane?.(dest.id);
            });
          if (!attemptDirect || !mayGoDirect(dest)) return store();
          return attemptDirect(dest.id, () => {
            const fields = callRecordFields(call, user);
            direct = new DirectMsg(msg, { subject, data: toBytes(body), headers: h, fields }, oneRecord);
            return direct;
          }).then((end) => {
            if (end !== undefined) d.metrics.direct.inc({ outcome: end });
            return end === "done" ? undefined : store();
          });
        }),
      );
    } catch (err) {
      // An attempt made is recorded, whatever happens to the call.
      if (direct?.kept) d.attemptLog?.attempt(direct.kept);
      // Backpressure, never loss: the call stays on EVENTS and is routed again later.
      countIfFull(DELIVERIES_STREAM, err);
      d.logger.warn({ seq: msg.seq, err: (err as Error).message }, "fan-out failed; will retry");
      msg.nak(BACKPRESSURE_DELAY_MS + Math.floor(Math.random() * 1000));
      d.metrics.routed.inc({ outcome: "backpressure" });
      span.end("backpressure", true);
      return;
    }
    msg.ack();
    this.#record(
      call,
      targets.map((dest) => dest.id),
      false,
      body,
      consentFiltered,
      fanOutOf(targets),
      user,
      direct?.kept,
    );
    d.metrics.routed.inc({ outcome: "routed" });
    span.end("routed", false, { [ATTR.targets]: targets.length });
  }

  #record(
    call: StoredCall,
    destinations: string[],
    filtered: boolean,
    body?: Uint8Array | string,
    consentFiltered: ConsentFiltered[] = [],
    fanOut?: Record<string, number>,
    user = erasable(call) ? userHash(call) : undefined,
    attempt?: AttemptRecord,
  ): void {
    const log = this.#d.attemptLog;
    if (!log?.enabled) return;
    const routed: RoutedRecord = {
      kind: "routed",
      messageId: call.messageId,
      sourceId: call.sourceId,
      ...(user === undefined ? {} : { userHash: user }),
      callType: call.type,
      ...(call.type === "track" && call.event ? { event: loggedEvent(call.event) } : {}),
      receivedAt: call.receivedAt,
      time: new Date().toISOString(),
      destinations,
      filtered,
      ...(consentFiltered.length > 0 ? { consentFiltered } : {}),
      ...(fanOut ? { fanOut } : {}),
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : decoder.decode(body) }),
    };
    if (attempt) log.delivered(routed, attempt);
    else log.routed(routed);
  }
}

/**
 * The destinations whose consent categories the call grants and whose filter passes it, and the
 * others with the reason (docs/design/shaping.md section 3). A filter expression that fails here
 * routes the call: delivery evaluates it again and records the failure, never a silent drop.
 */
async function byConsentAndFilter(
  call: StoredCall,
  destinations: readonly DestinationRecord[],
): Promise<{ targets: DestinationRecord[]; consentFiltered: ConsentFiltered[] }> {
  const targets: DestinationRecord[] = [];
  const consentFiltered: ConsentFiltered[] = [];
  let body: ReturnType<typeof bodyObject> | undefined;
  for (const dest of destinations) {
    const decision = consentDecision(call, dest);
    let reason = decision.deliver ? filterListsOf(dest, call) : (decision.reason ?? "consent");
    if (reason === undefined && dest.filter?.expression) {
      body ??= bodyObject(call);
      const ids = { messageId: call.messageId, sourceId: call.sourceId, destinationId: dest.id };
      if ((await filterExpressionPasses(dest, body, ids)) === false) reason = "filter: expression";
    }
    if (reason === undefined) targets.push(dest);
    else consentFiltered.push({ destinationId: dest.id, reason });
  }
  return { targets, consentFiltered };
}

/**
 * Where a call to these destinations is delivered: each destination, or for a FAN_OUT one each of
 * its URLs as a target of its own (docs/design/shaping.md 7.2: `ConfigStore.destination` answers
 * a target's view).
 */
function deliveryTargets(
  destinations: readonly DestinationRecord[],
  store: ConfigStore,
): DestinationRecord[] {
  const out: DestinationRecord[] = [];
  for (const dest of destinations) {
    if (dest.deliveryMode !== "FAN_OUT") {
      out.push(dest);
      continue;
    }
    dest.urls.forEach((_, i) => {
      const view = store.destination(targetId(dest.id, i));
      if (view) out.push(view);
    });
  }
  return out;
}

/** The FAN_OUT destinations among `destinations` and how many URLs each call goes to (routed record). */
function fanOutOf(destinations: readonly DestinationRecord[]): Record<string, number> | undefined {
  const fan = destinations.filter((d) => d.deliveryMode === "FAN_OUT");
  return fan.length === 0 ? undefined : Object.fromEntries(fan.map((d) => [d.id, d.urls.length]));
}

/** The rendered body as the handler reads it (a string is encoded per direct attempt: a call's few). */
function toBytes(body: string | Uint8Array): Uint8Array {
  return typeof body === "string" ? Buffer.from(body) : body;
}

/** The stored call, or what is wrong with it. */
export function parseStoredCall(data: Uint8Array): StoredCall | string {
  let v: unknown;
  try {
    v = JSON.parse(decoder.decode(data));
  } catch {
    return "not JSON";
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "not an object";
  const c = v as Partial<StoredCall>;
  if (!isEventType(c.type)) return "unknown type";
  if (typeof c.messageId !== "string" || c.messageId === "") return "no messageId";
  if (typeof c.sourceId !== "string" || c.sourceId === "") return "no sourceId";
  if (typeof c.timestamp !== "string" && typeof c.receivedAt !== "string") return "no timestamp";
  return c as StoredCall;
}
