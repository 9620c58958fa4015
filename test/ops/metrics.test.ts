import { Code, HookpostError } from "@hookpost/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { hasMetric, metric, type Sample, scrape } from "./helpers.js";

// The Prometheus counters of both services move with real traffic: scrape /metrics before and
// after sending calls through the whole pipeline.

let stack: Stack;
let bad: Receiver;
let flaky: Receiver;

beforeAll(async () => {
  stack = await Stack.start({
    ingest: { opsAddress: "127.0.0.1:0" },
    // The test counts a retry of each of flaky's calls: no breaker holds some of them back unattempted
    // (with the default 5, calls routed after the 5th failure wait out a cool-down of 5 s, then 10 s).
    dispatcher: { opsAddr: "127.0.0.1:0", breakerFailures: 1000 },
  });
  bad = await Receiver.http();
  bad.respond = () => ({ status: 400, body: "no" });
  flaky = await Receiver.http();
  flaky.respond = () => ({ status: 503 });
});

afterAll(async () => {
  await stack?.close();
  await bad?.close();
  await flaky?.close();
});

const ingestOps = () => stack.ingest.opsAddress!;
const dispatcherOps = () => `127.0.0.1:${stack.dispatchers[0]!.opsPort}`;

/** `after - before` of one series (sum over the matching label sets). */
const delta = (before: Sample[], after: Sample[], name: string, labels: Record<string, string> = {}) =>
  metric(after, name, labels) - metric(before, name, labels);

describe("metrics move with traffic", () => {
  it("ingest: calls by method and status, events by type, publish latency; dispatcher: deliveries, attempts, retries, dead letters, backlog", async () => {
    expect(stack.ingest.opsAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(stack.dispatchers[0]!.opsPort).toBeGreaterThan(0);

    const src = await stack.source("metrics");
    await stack.destination({ id: "ok", sourceIds: [src.id] });
    await stack.destination({ id: "bad", sourceIds: [src.id], urls: [bad.url()] });
    await stack.destination({ id: "flaky", sourceIds: [src.id], urls: [flaky.url()] });

    const ingestBefore = await scrape(ingestOps());
    const dispatcherBefore = await scrape(dispatcherOps());
    // Every family is declared before any traffic (labelled series appear with their first value).
    const ingestText = await (await fetch(`http://${ingestOps()}/metrics`)).text();
    const dispatcherText = await (await fetch(`http://${dispatcherOps()}/metrics`)).text();
    for (const name of [
      "hookpost_ingest_calls_total counter",
      "hookpost_ingest_events_total counter",
      "hookpost_ingest_publish_duration_seconds histogram",
      "hookpost_ingest_attempt_index_lag_records gauge",
    ]) {
      expect(ingestText).toContain(`# TYPE ${name}`);
    }
    for (const name of [
      "hookpost_dispatcher_deliveries_total counter",
      "hookpost_dispatcher_attempt_seconds histogram",
      "hookpost_dispatcher_retries_total counter",
      "hookpost_dispatcher_dead_letters_total counter",
      "hookpost_dispatcher_consumer_backlog gauge",
    ]) {
      expect(dispatcherText).toContain(`# TYPE ${name}`);
    }

    for (let i = 0; i < 5; i++) await src.client.track({ userId: `u-${i}`, event: "Signed Up" });
    for (let i = 0; i < 2; i++) await src.client.identify({ userId: `u-${i}`, traits: { plan: "pro" } });
    // Neither userId nor anonymousId: refused, and counted as such.
    const refused = await src.client.track({ event: "Nobody" }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(HookpostError);
    expect((refused as HookpostError).code).toBe(Code.INVALID_ARGUMENT);

    const ingestAfter = await scrape(ingestOps());
    const calls = "hookpost_ingest_calls_total";
    expect(delta(ingestBefore, ingestAfter, calls, { method: "IngestService/Track", code: "OK" })).toBe(5);
    expect(delta(ingestBefore, ingestAfter, calls, { method: "IngestService/Identify", code: "OK" })).toBe(2);
    expect(
      delta(ingestBefore, ingestAfter, calls, { method: "IngestService/Track", code: "INVALID_ARGUMENT" }),
    ).toBe(1);
    const events = "hookpost_ingest_events_total";
    expect(delta(ingestBefore, ingestAfter, events, { type: "track", outcome: "stored" })).toBe(5);
    expect(delta(ingestBefore, ingestAfter, events, { type: "identify", outcome: "stored" })).toBe(2);
    const publish = "hookpost_ingest_publish_duration_seconds";
    expect(delta(ingestBefore, ingestAfter, `${publish}_count`, { outcome: "stored" })).toBe(7);
    expect(delta(ingestBefore, ingestAfter, `${publish}_sum`, { outcome: "stored" })).toBeGreaterThan(0);
    expect(delta(ingestBefore, ingestAfter, `${publish}_bucket`, { outcome: "stored", le: "+Inf" })).toBe(7);
    expect(delta(ingestBefore, ingestAfter, "hookpost_ingest_call_duration_seconds_count")).toBe(8);
    expect(metric(ingestAfter, "hookpost_ingest_nats_connected")).toBe(1);
    // The ops port of a service process also carries the Node.js default metrics.
    expect(hasMetric(ingestAfter, "process_cpu_seconds_total")).toBe(true);

    // 7 calls x 3 destinations: "ok" delivers, "bad" (400) dead-letters at once, "flaky" (503) retries.
    const deliveries = "hookpost_dispatcher_deliveries_total";
    const backlog = "hookpost_dispatcher_consumer_backlog";
    // The backlog is read from JetStream, which applies an ack a moment after the counter moved:
    // wait for both to settle rather than read them in one instant. flaky's calls are all stored
    // once each has failed: 7 retries may be one call's second while another's first attempt (the
    // router's own, not stored) is still under way, and a retry being parked is on its partition
    // and its lane for a moment.
    const during = await until(
      async () => {
        const s = await scrape(dispatcherOps());
        const ok =
          delta(dispatcherBefore, s, deliveries, { outcome: "delivered" }) >= 7 &&
          delta(dispatcherBefore, s, deliveries, { outcome: "dead_letter" }) >= 7 &&
          delta(dispatcherBefore, s, "hookpost_dispatcher_retries_total") >= 7 &&
          s.some((x) => x.name === backlog && x.labels.destination === "bad") &&
          metric(s, backlog, { destination: "ok" }) === 0 &&
          metric(s, backlog, { destination: "bad" }) === 0 &&
          metric(s, backlog, { destination: "flaky" }) === 7;
        return ok ? s : undefined;
      },
      { message: "deliveries, dead letters and their acks" },
    );
    expect(stack.receiver.requests).toHaveLength(7);
    expect(bad.requests).toHaveLength(7);
    expect(
      delta(dispatcherBefore, during, "hookpost_dispatcher_events_routed_total", { outcome: "routed" }),
    ).toBe(7);
    expect(delta(dispatcherBefore, during, deliveries, { outcome: "delivered" })).toBe(7);
    expect(delta(dispatcherBefore, during, deliveries, { outcome: "dead_letter" })).toBe(7);
    expect(
      delta(dispatcherBefore, during, "hookpost_dispatcher_dead_letters_total", { cause: "not_retryable" }),
    ).toBe(7);
    const retried = delta(dispatcherBefore, during, deliveries, { outcome: "retry" });
    expect(retried).toBeGreaterThanOrEqual(7);
    expect(delta(dispatcherBefore, during, "hookpost_dispatcher_retries_total")).toBe(retried);
    const attempts = "hookpost_dispatcher_attempt_seconds";
    expect(delta(dispatcherBefore, during, `${attempts}_count`, { result: "2xx" })).toBe(7);
    // Labelled by destination and status class: "bad" answered 4xx 7 times, "flaky" only 5xx.
    expect(delta(dispatcherBefore, during, `${attempts}_count`, { result: "4xx", destination: "bad" })).toBe(
      7,
    );
    expect(delta(dispatcherBefore, during, `${attempts}_count`, { result: "5xx", destination: "bad" })).toBe(
      0,
    );
    expect(delta(dispatcherBefore, during, deliveries, { outcome: "delivered", destination: "ok" })).toBe(7);
    const httpFailures =
      delta(dispatcherBefore, during, `${attempts}_count`, { result: "4xx" }) +
      delta(dispatcherBefore, during, `${attempts}_count`, { result: "5xx" });
    expect(httpFailures).toBeGreaterThanOrEqual(7 + 7);
    expect(httpFailures).toBeLessThanOrEqual(7 + flaky.requests.length);
    expect(delta(dispatcherBefore, during, `${attempts}_sum`)).toBeGreaterThan(0);
    expect(delta(dispatcherBefore, during, `${attempts}_bucket`, { result: "2xx", le: "+Inf" })).toBe(7);
    // The deliveries to "flaky" wait for their retries: that is the backlog.
    expect(metric(during, backlog, { destination: "flaky" })).toBe(7);
    expect(metric(during, backlog, { destination: "ok" })).toBe(0);
    expect(metric(during, backlog, { destination: "bad" })).toBe(0);

    // The endpoint recovers: the retries deliver and the backlog drains.
    flaky.respond = () => ({ status: 200 });
    const drained = await until(
      async () => {
        const s = await scrape(dispatcherOps());
        const flakyBacklog = s.find((x) => x.name === backlog && x.labels.destination === "flaky");
        return flakyBacklog?.value === 0 ? s : undefined;
      },
      { timeout: 30_000, message: "the flaky backlog to drain", interval: 250 },
    );
    expect(delta(dispatcherBefore, drained, deliveries, { outcome: "delivered" })).toBe(14);
    expect(delta(dispatcherBefore, drained, `${attempts}_count`, { result: "2xx" })).toBe(14);
    expect(flaky.messageIds().size).toBe(7);
  });
});
