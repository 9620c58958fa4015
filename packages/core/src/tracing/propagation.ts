import { type Context, ROOT_CONTEXT, type TextMapGetter, type TextMapSetter } from "@opentelemetry/api";
import { TRACE_PARENT_HEADER, W3CTraceContextPropagator } from "@opentelemetry/core";

/** A W3C trace context (`traceparent` + `tracestate`), as the OpenTelemetry API carries it. */
export type TraceContext = Context;

/** Reads one header (any case the transport uses); arrays are repeated headers. */
export type HeaderGetter = (name: string) => string | readonly string[] | null | undefined;

// Used directly, not through the global propagator: an incoming trace context is carried on even
// when tracing is off here, so a traced caller still sees its trace continue at the receiver.
const w3c = new W3CTraceContextPropagator();
const getter: TextMapGetter<HeaderGetter> = {
  get: (read, key) => {
    const v = read(key);
    return v === null || v === undefined || v === "" ? undefined : (v as string | string[]);
  },
  keys: () => [],
};
const setter: TextMapSetter<(name: string, value: string) => void> = {
  set: (write, key, value) => write(key, value),
};

/**
 * The trace context of an incoming request, from its `traceparent`/`tracestate` headers (gRPC
 * metadata, HTTP headers, NATS headers); the empty context when there is none or it is malformed.
 * HTTP servers: `extractTraceContext((n) => req.headers[n])`.
 */
export function extractTraceContext(getHeader: HeaderGetter): TraceContext {
  if (!getHeader(TRACE_PARENT_HEADER)) return ROOT_CONTEXT;
  return w3c.extract(ROOT_CONTEXT, getHeader, getter);
}

/** Writes `traceparent` (and `tracestate`) of `ctx`, when it holds a valid span context. */
export function injectTraceContext(ctx: TraceContext, write: (name: string, value: string) => void): void {
  w3c.inject(ctx, write, setter);
}

/** The trace context of a gRPC call, from its metadata (ASCII `traceparent`/`tracestate`). */
export function grpcTraceContext(metadata: { get(key: string): Array<string | Buffer> }): TraceContext {
  return extractTraceContext((name) => {
    const v = metadata.get(name)[0];
    return typeof v === "string" ? v : undefined;
  });
}
