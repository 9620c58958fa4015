import {
  AttemptIndex,
  AttemptLog,
  AttemptReader,
  type AttemptRecord,
  AttemptSearch,
  DEFAULT_TOPOLOGY,
  type DropReason,
  ensureTopology,
  type HealthSummary,
  healthSubject,
  messageHash,
  type RoutedRecord,
  routedSubject,
} from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { useNats } from "../helpers/use-nats.js";

// The publisher never blocks and never grows without bound: records it cannot write are dropped
// and counted, and bodies are left out when asked.

const nats = useNats();
/** Reads the attempt log through an attempt index, closed after the tests. */
const attempts = useFixture(async () => {
  const jsm = await nats.nc.jetstreamManager();
  await ensureTopology(jsm, DEFAULT_TOPOLOGY);
  const index = await AttemptIndex.open(nats.nc, { logger: quietLogger });
  return { reader: new AttemptReader(new AttemptSearch(jsm, index)), close: () => index.close() };
}, "attempt reader");

let n = 0;
function record(destinationId: string): AttemptRecord {
  return {
    kind: "attempt",
    messageId: `m-${++n}`,
    destinationId,
    sourceId: "s",
    url: "http://127.0.0.1/hook",
    attemptNumber: 1,
    startTime: new Date().toISOString(),
    durationMs: 3,
    outcome: "server_error",
    status: 500,
    reason: "500 is retried",
    retryable: true,
    responseBody: "down",
    requestBody: '{"type":"track"}',
  };
}

/** An attempt log writing `replica`'s health summary every 20 ms, and the summaries seen since. */
async function withHealth(replica: string, o: { bodies: boolean; breakerRefreshMs?: number }) {
  const seen: HealthSummary[] = [];
  const sub = nats.nc.subscribe(healthSubject(replica), {
    callback: (_err, m) => seen.push(m.json<HealthSummary>()),
  });
  await nats.nc.flush();
  const health = {
    replica,
    everyMs: 20,
    ...(o.breakerRefreshMs ? { breakerRefreshMs: o.breakerRefreshMs } : {}),
  };
  const log = new AttemptLog(nats.nc, { enabled: true, bodies: o.bodies, logger: quietLogger, health });
  return { log, seen, sub };
}

describe("AttemptLog", () => {
  it("writes records readable newest first, without bodies when told so", async () => {
    const log = new AttemptLog(nats.nc, { enabled: true, bodies: false, logger: quietLogger });
    for (let i = 0; i < 3; i++) log.attempt(record("pub-a"));
    await log.flush();
    const page = await attempts.reader.list({
      destinationId: "pub-a",
      pageSize: 10,
    });
    expect(page.attempts.map((a) => a.messageId)).toEqual([`m-${n}`, `m-${n - 1}`, `m-${n - 2}`]);
    expect(page.attempts.every((a) => a.requestBody === undefined && a.responseBody === "down")).toBe(true);
    expect(log.dropped).toBe(0);
  });

  it("drops and counts what it cannot write instead of waiting", async () => {
    const drops: DropReason[] = [];
    const away = new AttemptLog(nats.nc, {
      enabled: true,
      bodies: true,
      connected: () => false,
      logger: quietLogger,
      onDrop: (why) => drops.push(why),
    });
    away.attempt(record("pub-b"));
    expect(drops).toEqual(["disconnected"]);

    // A tiny budget of unflushed bytes: the first record fits, those right after it do not.
    const full = new AttemptLog(nats.nc, {
      enabled: true,
      bodies: true,
      maxPendingBytes: 10,
      logger: quietLogger,
      onDrop: (why) => drops.push(why),
    });
    for (let i = 0; i < 5; i++) full.attempt(record("pub-b"));
    expect(drops).toEqual(["disconnected", "full", "full", "full", "full"]);
    expect(full.dropped).toBe(4);

    const off = new AttemptLog(nats.nc, {
      enabled: false,
      bodies: true,
      logger: quietLogger,
      onDrop: (why) => drops.push(why),
    });
    off.attempt(record("pub-b"));
    await full.flush();
    const page = await attempts.reader.list({
      destinationId: "pub-b",
      pageSize: 10,
    });
    expect(page.attempts).toHaveLength(1);
  });

  it("joins each attempt's request body from the routed record of the same source and message id", async () => {
    const log = new AttemptLog(nats.nc, { enabled: true, bodies: true, logger: quietLogger });
    const routed = (messageId: string, sourceId: string, body?: string): RoutedRecord => ({
      kind: "routed",
      messageId,
      sourceId,
      receivedAt: new Date().toISOString(),
      time: new Date().toISOString(),
      destinations: ["pub-c"],
      filtered: false,
      ...(body === undefined ? {} : { body }),
    });
    const attempt = (messageId: string, sourceId: string): AttemptRecord => {
      const { requestBody: _, ...r } = record("pub-c");
      return { ...r, messageId, sourceId };
    };
    // Another message's record on the same subject first (what a hash collision looks like).
    nats.nc.publish(
      routedSubject(messageHash("join-a")),
      JSON.stringify(routed("other", "s-a", '{"other":true}')),
    );
    // The dispatcher's attempt may be stored before the router's record of the call.
    log.attempt(attempt("join-late", "s-a"));
    await log.flush();
    log.routed(routed("join-late", "s-a", '{"late":1}'));
    // Two sources used the same message id: each attempt gets its own source's body.
    log.routed(routed("join-a", "s-a", '{"a":1}'));
    log.routed(routed("join-a", "s-b", '{"b":2}'));
    log.routed(routed("join-unlogged", "s-a")); // stored without its body (ATTEMPT_LOG_BODIES=off)
    await log.flush();
    for (const [id, source] of [
      ["join-a", "s-b"],
      ["join-a", "s-a"],
      ["join-unlogged", "s-a"],
      ["join-never-routed", "s-a"],
    ] as const)
      log.attempt(attempt(id, source));
    await log.flush();
    const page = await attempts.reader.list({
      destinationId: "pub-c",
      pageSize: 10,
    });
    expect(page.attempts.map((a) => [a.messageId, a.sourceId, a.requestBody])).toEqual([
      ["join-never-routed", "s-a", undefined],
      ["join-unlogged", "s-a", undefined],
      ["join-a", "s-a", '{"a":1}'],
      ["join-a", "s-b", '{"b":2}'],
      ["join-late", "s-a", '{"late":1}'],
    ]);
  });

  it("writes a call delivered directly as one message, which readers and health see as its routing record and attempt", async () => {
    const { log, seen, sub } = await withHealth("pub-one", { bodies: true });
    const quiet = new AttemptLog(nats.nc, { enabled: true, bodies: false, logger: quietLogger });
    const now = new Date().toISOString();
    const routed = (messageId: string): RoutedRecord => ({
      kind: "routed",
      messageId,
      sourceId: "s-one",
      callType: "track",
      receivedAt: now,
      time: now,
      destinations: ["pub-d"],
      filtered: false,
      body: '{"one":1}',
    });
    const delivered = (messageId: string): AttemptRecord => {
      const { requestBody: _, ...r } = record("pub-d");
      return { ...r, messageId, sourceId: "s-one", callType: "track", outcome: "success", status: 200 };
    };
    log.delivered(routed("one-a"), delivered("one-a"));
    quiet.delivered(routed("one-b"), delivered("one-b"));
    await Promise.all([log.flush(), quiet.flush()]);

    const story = async (messageId: string) =>
      (await attempts.reader.forMessage(messageId)).records.map((r) => [
        r.kind,
        r.sequence,
        r.kind === "routed" ? r.body : r.kind === "attempt" ? r.requestBody : undefined,
      ]);
    // Both records at one sequence: one message.
    const a = await story("one-a");
    expect(a).toEqual([
      ["routed", a[0]![1], '{"one":1}'],
      ["attempt", a[0]![1], '{"one":1}'],
    ]);
    const b = await story("one-b");
    expect(b).toEqual([
      ["routed", b[0]![1], undefined],
      ["attempt", b[0]![1], undefined],
    ]);
    const page = await attempts.reader.list({ destinationId: "pub-d", pageSize: 10 });
    expect(page.attempts.map((x) => [x.messageId, x.requestBody])).toEqual([
      ["one-b", undefined],
      ["one-a", '{"one":1}'],
    ]);
    // Health counts the call routed to the destination and delivered there, once each.
    const sum = (pick: (d: HealthSummary["destinations"][string]) => Record<string, number> | undefined) =>
      seen.reduce(
        (n, x) => n + Object.values(pick(x.destinations["pub-d"] ?? {}) ?? {}).reduce((m, v) => m + v, 0),
        0,
      );
    await until(() => sum((d) => d.delivered) > 0, { message: "a summary with the delivery" });
    expect(sum((d) => d.incoming)).toBe(1);
    expect(sum((d) => d.delivered)).toBe(1);
    sub.unsubscribe();
  });

  it("reports breaker changes without an attempt record, again while not closed, and leaving at close", async () => {
    const { log, seen, sub } = await withHealth("pub-breakers", { bodies: false, breakerRefreshMs: 100 });
    const until5s = Date.now() + 5_000;
    log.breaker("brk-a", { state: "open", until: until5s, failures: 5 });
    await until(() => seen.length >= 1, { message: "a summary with the breaker" });
    expect(seen[0]!.destinations).toEqual({
      "brk-a": { breaker: { state: "open", until: until5s, failures: 5 } },
    });
    // Nothing else happens: the open breaker is reported again, as it is.
    await until(() => seen.length >= 3, { message: "the open breaker reported again" });
    expect(seen.slice(1).every((x) => x.destinations["brk-a"]?.breaker?.state === "open")).toBe(true);

    log.breaker("brk-a", { state: "closed", failures: 0 });
    await until(() => seen.at(-1)!.destinations["brk-a"]?.breaker?.state === "closed", {
      message: "the breaker closed",
    });
    // Closed: not reported again (a summary written meanwhile would be one more, and say open).
    const after = seen.length;
    log.breaker("brk-b", { state: "half_open", until: Date.now(), failures: 6 });
    await until(() => seen.filter((x) => x.destinations["brk-b"]).length >= 3, {
      message: "brk-b reported again",
    });
    expect(seen.slice(after).some((x) => x.destinations["brk-a"])).toBe(false);

    await log.close();
    await until(() => seen.at(-1)!.leaving, { message: "the leaving summary" });
    sub.unsubscribe();
  });
});
