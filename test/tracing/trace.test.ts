import { startTracing, type Tracing } from "@hookpost/core";
import { SpanKind } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { Receiver } from "../helpers/receiver.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// Ingest and dispatcher in this process, tracing into an in-memory exporter: a gRPC (or HTTP) call that
// carries a W3C traceparent yields one trace (publish → route → each delivery attempt → each
// webhook request), and the webhook receiver gets a traceparent of that same trace.

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const SECRET = "tracing-shared-secret";

const exporter = new InMemorySpanExporter();
let tracing: Tracing;
let stack: Stack;
let failing: Receiver;

beforeAll(async () => {
  tracing = await startTracing("hookpost-test", {}, quietLogger, { exporter });
  stack = await Stack.start({ ingest: { httpAddress: "127.0.0.1:0" } });
  failing = await Receiver.http();
});

afterAll(async () => {
  await stack?.close();
  await failing?.close();
  await tracing?.shutdown();
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan) => s.spanContext().spanId;
/** `00-<trace id>-<parent span id>-<flags>` split. */
const traceparent = (v: string | string[] | undefined) => {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(v));
  if (!m) throw new Error(`not a traceparent: ${v}`);
  return { traceId: m[1]!, parentId: m[2]! };
};

describe("tracing through ingest, NATS and the dispatcher", () => {
  it("continues the caller's trace from the gRPC call to every webhook request", async () => {
    const src = await stack.source("traced");
    // The first URL fails once, then both fail over to the second: attempt 1 = 500 then 200.
    failing.respond = () => ({ status: 500, body: "broken" });
    const dest = await stack.destination({
      sourceIds: [src.id],
      urls: [failing.url(), stack.receiver.url()],
      sharedSecret: SECRET,
    });
    const { messageId } = await src.client.track(
      { userId: "u-1", event: "Traced" },
      { metadata: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, tracestate: "vendor=abc" } },
    );

    const [req] = await stack.receiver.waitFor(1, 20_000);
    const sent = traceparent(req!.headers.traceparent);
    expect(sent.traceId).toBe(TRACE_ID);
    expect(req!.headers.tracestate).toBe("vendor=abc");
    expect(traceparent(failing.requests[0]!.headers.traceparent).traceId).toBe(TRACE_ID);

    const spans = await until(
      () => {
        const mine = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === TRACE_ID);
        return mine.length >= 5 && mine;
      },
      { timeout: 20_000, message: "publish, route, delivery and two request spans" },
    );
    expect(spans.map((s) => s.name).sort()).toEqual([
      "POST",
      "POST",
      "hookpost deliver",
      "hookpost publish",
      "hookpost route",
    ]);
    const by = (name: string) => spans.filter((s) => s.name === name);
    const [publish] = by("hookpost publish");
    const [route] = by("hookpost route");
    const [deliver] = by("hookpost deliver");
    const posts = by("POST");

    // One chain: caller → publish → route → deliver → each request.
    expect(parentOf(publish!)).toBe(CALLER_SPAN);
    expect(publish!.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(route!)).toBe(idOf(publish!));
    expect(parentOf(deliver!)).toBe(idOf(route!));
    for (const p of posts) expect(parentOf(p)).toBe(idOf(deliver!));
    // The receiver's parent is the request span that reached it.
    const ok = posts.find((p) => p.attributes["http.response.status_code"] === 200)!;
    expect(sent.parentId).toBe(idOf(ok));

    expect(publish!.attributes).toMatchObject({
      "hookpost.message_id": messageId,
      "hookpost.source_id": src.id,
      "hookpost.outcome": "stored",
    });
    expect(route!.attributes).toMatchObject({ "hookpost.outcome": "routed", "hookpost.destinations": 1 });
    expect(deliver!.attributes).toMatchObject({
      "hookpost.message_id": messageId,
      "hookpost.destination_id": dest.id,
      "hookpost.attempt": 1,
      "hookpost.outcome": "delivered",
    });
    const failed = posts.find((p) => p.attributes["http.response.status_code"] === 500)!;
    expect(failed.attributes).toMatchObject({
      "server.address": "127.0.0.1",
      "error.type": "500",
      "hookpost.outcome": "http_500",
    });
    expect(failed.status.code).toBe(2); // ERROR
    expect(ok.attributes["hookpost.outcome"]).toBe("delivered");

    // Names only: no bodies, paths, keys or secrets in any attribute.
    const values = JSON.stringify(spans.map((s) => s.attributes));
    for (const secret of [SECRET, src.writeKey, "Traced", "/webhook", "broken"]) {
      expect(values).not.toContain(secret);
    }
  });

  it("continues the caller's trace from an HTTP API call to the webhook request (issue 22 finding 10)", async () => {
    const src = await stack.source("traced-http");
    failing.respond = () => ({ status: 200 });
    await stack.destination({ sourceIds: [src.id], urls: [failing.url()] });
    const before = failing.requests.length;
    const res = await fetch(`http://${stack.ingest.httpAddress}/v1/track`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Authorization: `Basic ${Buffer.from(`${src.writeKey}:`).toString("base64")}`,
        traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`,
      },
      body: JSON.stringify({ userId: "u-http", event: "Traced over HTTP", messageId: "traced-http-1" }),
    });
    expect(res.status).toBe(200);
    await until(() => failing.requests.length > before, { timeout: 20_000, message: "the delivery" });
    expect(traceparent(failing.requests[before]!.headers.traceparent).traceId).toBe(TRACE_ID);
    // Ingest's publish span is a child of the caller's span, as for gRPC.
    const publish = exporter
      .getFinishedSpans()
      .find((s) => s.name === "hookpost publish" && s.attributes["hookpost.message_id"] === "traced-http-1");
    expect(publish && parentOf(publish)).toBe(CALLER_SPAN);
  });

  it("starts a trace for a call without a traceparent; every retry is a span of it", async () => {
    const src = await stack.source("untraced");
    let n = 0;
    failing.respond = () => (++n === 1 ? { status: 503, body: "later" } : { status: 200 });
    await stack.destination({ sourceIds: [src.id], urls: [failing.url()] });
    const before = failing.requests.length;
    const { messageId } = await src.client.track({ userId: "u-2", event: "Fresh" });
    await until(() => failing.requests.length >= before + 2, {
      timeout: 20_000,
      message: "the retry to succeed",
    });
    const first = traceparent(failing.requests[before]!.headers.traceparent);
    const second = traceparent(failing.requests[before + 1]!.headers.traceparent);
    expect(second.traceId).toBe(first.traceId);
    expect(first.traceId).not.toBe(TRACE_ID);

    const delivers = await until(
      () => {
        const d = exporter
          .getFinishedSpans()
          .filter((s) => s.name === "hookpost deliver" && s.attributes["hookpost.message_id"] === messageId);
        return d.length >= 2 && d;
      },
      { timeout: 20_000, message: "two delivery spans" },
    );
    expect(delivers.map((s) => [s.attributes["hookpost.attempt"], s.attributes["hookpost.outcome"]])).toEqual(
      [
        [1, "retry"],
        [2, "delivered"],
      ],
    );
    const [publish] = exporter
      .getFinishedSpans()
      .filter((s) => s.name === "hookpost publish" && s.attributes["hookpost.message_id"] === messageId);
    expect(publish!.parentSpanContext).toBeUndefined();
    expect(publish!.spanContext().traceId).toBe(first.traceId);
  });

  it("when tracing is off, records nothing but still hands the caller's trace on to the receiver", async () => {
    await tracing.shutdown();
    exporter.reset();
    const src = await stack.source("off");
    failing.respond = () => ({ status: 200 });
    await stack.destination({ sourceIds: [src.id], urls: [failing.url()] });
    const before = failing.requests.length;
    await src.client.track(
      { userId: "u-3", event: "Off" },
      { metadata: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01` } },
    );
    await until(() => failing.requests.length > before, { timeout: 20_000, message: "the delivery" });
    expect(traceparent(failing.requests[before]!.headers.traceparent)).toEqual({
      traceId: TRACE_ID,
      parentId: CALLER_SPAN,
    });
    expect(exporter.getFinishedSpans()).toHaveLength(0);
  });
});
