import {
  type Attributes,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
} from "@opentelemetry/semantic-conventions";
import type { MsgHdrs } from "nats";
import { extractTraceContext, injectTraceContext, type TraceContext } from "./propagation.js";

/**
 * Hookpost's spans. Attributes name things (message, source, destination ids, the URL's host,
 * status and outcome), never carry content: no bodies, URLs with their paths, keys or secrets.
 */
export const ATTR = {
  messageId: "hookpost.message_id",
  sourceId: "hookpost.source_id",
  destinationId: "hookpost.destination_id",
  callType: "hookpost.call_type",
  attempt: "hookpost.attempt",
  outcome: "hookpost.outcome",
  targets: "hookpost.destinations",
  messagingSystem: "messaging.system",
  messagingDestination: "messaging.destination.name",
} as const;

/** One step of a call's way through Hookpost (publish, route, delivery, HTTP request). */
export interface StepSpan {
  /** The context children start in and that is sent on (NATS headers, the webhook request). */
  readonly context: TraceContext;
  /** Adds `traceparent`/`tracestate` to outgoing NATS headers or HTTP request headers. */
  inject(target: MsgHdrs | Record<string, string>): void;
  /** Ends the span with its outcome; `failed` marks it as an error. */
  end(outcome: string, failed?: boolean, attributes?: Attributes): void;
}

class ApiStepSpan implements StepSpan {
  readonly #span: Span;
  readonly context: TraceContext;

  constructor(name: string, kind: SpanKind, parent: TraceContext, attributes: Attributes) {
    this.#span = trace.getTracer("hookpost").startSpan(name, { kind, attributes }, parent);
    this.context = trace.setSpan(parent, this.#span);
  }

  inject(target: MsgHdrs | Record<string, string>): void {
    const set = target.set;
    if (typeof set === "function") injectTraceContext(this.context, (k, v) => (target as MsgHdrs).set(k, v));
    else injectTraceContext(this.context, (k, v) => ((target as Record<string, string>)[k] = v));
  }

  end(outcome: string, failed = false, attributes: Attributes = {}): void {
    if (!this.#span.isRecording()) return;
    this.#span.setAttributes({ ...attributes, [ATTR.outcome]: outcome });
    if (failed) this.#span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    this.#span.end();
  }
}

/** Tracing off and nothing to carry on: every hook is a no-op (no allocation, no parsing). */
const NOTHING: StepSpan = { context: ROOT_CONTEXT, inject: () => {}, end: () => {} };

/** Whether the SDK records spans (set by startTracing). */
let recording = false;
export function setRecording(on: boolean): void {
  recording = on;
}

/**
 * A span for a step, or nothing when tracing is off and there is no incoming trace (with one, the
 * API's non-recording span hands the caller's context on unchanged).
 */
function step(name: string, kind: SpanKind, parent: TraceContext, attributes: () => Attributes): StepSpan {
  if (!recording && trace.getSpanContext(parent) === undefined) return NOTHING;
  return new ApiStepSpan(name, kind, parent, attributes());
}

/** The trace context a NATS message carries (EVENTS and DELIVERIES both carry one). */
export function natsTraceContext(headers: MsgHdrs | undefined): TraceContext {
  return extractTraceContext((name) => headers?.get(name));
}

/** Ingest: storing one call on EVENTS. */
export function startPublishSpan(
  call: { messageId: string; sourceId: string; type: string },
  subject: string,
  parent: TraceContext = ROOT_CONTEXT,
): StepSpan {
  return step("hookpost publish", SpanKind.PRODUCER, parent, () => ({
    [ATTR.messageId]: call.messageId,
    [ATTR.sourceId]: call.sourceId,
    [ATTR.callType]: call.type,
    [ATTR.messagingSystem]: "nats",
    [ATTR.messagingDestination]: subject,
  }));
}

/** Dispatcher: fanning one stored call out to its destinations. */
export function startRouteSpan(
  headers: MsgHdrs | undefined,
  call: { messageId: string; sourceId: string; type: string },
): StepSpan {
  return step("hookpost route", SpanKind.CONSUMER, natsTraceContext(headers), () => ({
    [ATTR.messageId]: call.messageId,
    [ATTR.sourceId]: call.sourceId,
    [ATTR.callType]: call.type,
    [ATTR.messagingSystem]: "nats",
  }));
}

/** Dispatcher: one delivery attempt of a message to a destination (its URLs tried in order). */
export function startDeliverySpan(
  headers: MsgHdrs | undefined,
  destinationId: string,
  messageId: string,
  attempt: number,
): StepSpan {
  return step("hookpost deliver", SpanKind.CONSUMER, natsTraceContext(headers), () => ({
    [ATTR.messageId]: messageId,
    [ATTR.destinationId]: destinationId,
    [ATTR.attempt]: attempt,
    [ATTR.messagingSystem]: "nats",
  }));
}

/** Dispatcher: the webhook request to one URL; only its host is recorded. */
export function startRequestSpan(
  parent: TraceContext | undefined,
  url: string,
  destinationId: string,
  messageId: string,
): StepSpan {
  return step("POST", SpanKind.CLIENT, parent ?? ROOT_CONTEXT, () => {
    const attributes: Attributes = {
      [ATTR.messageId]: messageId,
      [ATTR.destinationId]: destinationId,
      [ATTR_HTTP_REQUEST_METHOD]: "POST",
    };
    try {
      const u = new URL(url);
      attributes[ATTR_SERVER_ADDRESS] = u.hostname;
      if (u.port) attributes[ATTR_SERVER_PORT] = Number(u.port);
    } catch {
      // not a URL: the outcome says so
    }
    return attributes;
  });
}

/** Ends a request span with what came back: the status code, or the error kind. */
export function endRequestSpan(
  span: StepSpan,
  o: { ok: boolean; status: number; error: string; aborted: boolean },
): void {
  if (span === NOTHING) return;
  const outcome = o.ok ? "delivered" : o.aborted ? "aborted" : o.status ? `http_${o.status}` : o.error;
  const attributes: Attributes = {};
  if (o.status) attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = o.status;
  if (!o.ok) attributes[ATTR_ERROR_TYPE] = o.status ? String(o.status) : o.error;
  span.end(outcome, !o.ok, attributes);
}
