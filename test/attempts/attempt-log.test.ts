import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  AttemptOutcome,
  DeliveryState,
  DestinationState,
  LogStatus,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { ATTEMPTS_STREAM, type AttemptRecord, type RoutedRecord, routedRecordSubject } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeCerts, type TestCerts } from "../dispatcher/helpers.js";
import { untilDeadLetters } from "../helpers/dead-letters.js";
import { code } from "../helpers/grpc-code.js";
import { Receiver } from "../helpers/receiver.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// The attempt log end to end: real ingest, NATS, dispatcher and receivers. Every attempt (and
// every refusal before a request) is recorded with a readable reason; the admin API lists them,
// tells one message's story, and sums a destination's health.

let stack: Stack;
let certs: TestCerts;
const receivers: Receiver[] = [];

beforeAll(async () => {
  certs = makeCerts();
  // A short timeout so that a hanging endpoint is a timeout quickly, yet 3 s: the receivers answer
  // in this process, and a loaded machine stalling it past the timeout while the other endpoints'
  // answers are on their way made them timeouts too (it was 1.5 s); retries far apart, so a
  // retrying delivery stays "retrying" while the test looks at it.
  stack = await Stack.start({ dispatcher: { webhookTimeoutMs: 3000, retryBaseDelayMs: 60_000 } });
});

afterAll(async () => {
  await stack?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(respond: Receiver["respond"]): Promise<Receiver> {
  const r = await Receiver.http();
  r.respond = respond;
  receivers.push(r);
  return r;
}

/** Attempts of one destination, once there are at least `n`. */
async function attemptsOf(destinationId: string, n: number) {
  let list: Awaited<ReturnType<typeof stack.admin.listAttempts>>["attempts"] = [];
  await until(
    async () => {
      list = (await stack.admin.listAttempts({ destinationId, pageSize: 1000 })).attempts;
      return list.length >= n;
    },
    { timeout: 20_000, message: `${n} attempts of ${destinationId}` },
  );
  return list;
}

describe("attempt log", () => {
  it("records success, 500, 422, timeout, SSRF and TLS refusals with readable reasons and response excerpts", async () => {
    const src = await stack.source("attempts");
    const ok = await receiver(() => ({ status: 200, body: "thanks" }));
    const broken = await receiver(() => ({ status: 500, body: `database down ${"x".repeat(6000)}` }));
    const picky = await receiver(() => ({ status: 422, body: '{"error":"missing field plan"}' }));
    const slow = await receiver(() => ({ hang: true }));
    const tls = await Receiver.https(certs.selfSignedCert, certs.selfSignedKey);
    receivers.push(tls);
    const urls: Record<string, string> = {
      "a-ok": ok.url(),
      "a-500": broken.url(),
      "a-422": picky.url(),
      "a-timeout": slow.url(),
      // Not in WEBHOOK_ALLOWED_CIDRS (loopback only here): refused before connecting.
      "a-ssrf": "http://10.255.255.1/hook",
      "a-tls": tls.url(),
    };
    for (const [id, url] of Object.entries(urls))
      await stack.destination({ id, sourceIds: [src.id], urls: [url] });
    const { messageId } = await src.client.track({ userId: "u-1", event: "Signed Up" });

    const one = async (id: string) => (await attemptsOf(id, 1))[0]!;
    const success = await one("a-ok");
    expect(success).toMatchObject({
      messageId,
      destinationId: "a-ok",
      sourceId: src.id,
      url: ok.url(),
      attemptNumber: 1,
      outcome: AttemptOutcome.SUCCESS,
      status: 200,
      reason: "delivered (200)",
      responseBody: "thanks",
    });
    // The request body is the bytes the endpoint was sent, on every destination's attempts.
    const sentBody = ok.requests[0]!.body.toString("utf8");
    expect(sentBody).toContain('"event":"Signed Up"');
    expect(success.requestBody).toBe(sentBody);
    expect(success.nextAttemptTime).toBeUndefined();
    // It is stored once, on the call's routed record: the attempt records leave it out.
    const stored = await (await stack.nc.jetstreamManager()).streams.getMessage(ATTEMPTS_STREAM, {
      seq: Number(success.sequence),
    });
    expect(stored.json<AttemptRecord>()).not.toHaveProperty("requestBody");

    const e500 = await one("a-500");
    expect(e500).toMatchObject({
      outcome: AttemptOutcome.SERVER_ERROR,
      status: 500,
      reason: "500 is retried",
    });
    expect(e500.retryable).toBe(true);
    // The first 4 KiB of the answer, not all of it.
    expect(e500.responseBody.startsWith("database down xxx")).toBe(true);
    expect(e500.responseBody).toHaveLength(4096);
    expect(timestampDate(e500.nextAttemptTime!).getTime()).toBeGreaterThan(Date.now());

    expect(await one("a-422")).toMatchObject({
      outcome: AttemptOutcome.CLIENT_ERROR,
      status: 422,
      reason: "422 is not retried",
      retryable: false,
      responseBody: '{"error":"missing field plan"}',
    });
    const timeout = await one("a-timeout");
    expect(timeout).toMatchObject({ outcome: AttemptOutcome.TIMEOUT, status: 0, retryable: true });
    expect(timeout.reason).toMatch(/^timeout after 3000 ms/);
    const ssrf = await one("a-ssrf");
    expect(ssrf).toMatchObject({ outcome: AttemptOutcome.SSRF, status: 0, retryable: false });
    expect(ssrf.reason).toMatch(/^refused before connecting: .*WEBHOOK_ALLOWED_CIDRS/);
    const bad = await one("a-tls");
    expect(bad.outcome).toBe(AttemptOutcome.TLS);
    expect(bad.reason).toMatch(/^TLS certificate refused, no request sent: .*SELF_SIGNED/);
    expect(tls.requests).toHaveLength(0);

    // One message's story across all six destinations.
    const story = await stack.admin.getMessage({ messageId });
    expect(story.sourceId).toBe(src.id);
    expect(story.body).toBe(sentBody);
    expect(story.attempts.every((a) => a.requestBody === sentBody)).toBe(true);
    expect(story.noDestination).toBe(false);
    const states = Object.fromEntries(story.deliveries.map((d) => [d.destinationId, d.state]));
    expect(states).toMatchObject({
      "a-ok": DeliveryState.DELIVERED,
      "a-500": DeliveryState.RETRYING,
      "a-timeout": DeliveryState.RETRYING,
    });
    await until(async () => {
      const s = await stack.admin.getMessage({ messageId });
      return ["a-422", "a-ssrf", "a-tls"].every(
        (id) => s.deliveries.find((d) => d.destinationId === id)?.state === DeliveryState.DEAD_LETTER,
      );
    });
    // The dead letter says the rule, once. (Waited for: the attempt is recorded, and the message
    // says dead-lettered, before the dead letter is written.)
    const letters = await untilDeadLetters(stack.admin, "a-422", 1, { message: "a-422's dead letter" });
    expect(letters.map((l) => l.reason)).toEqual(["422 is not retried"]);
    const retrying = story.deliveries.find((d) => d.destinationId === "a-500")!;
    expect(retrying.attempts).toBe(1);
    expect(timestampDate(retrying.nextAttemptTime!).getTime()).toBeGreaterThan(Date.now());
    expect(story.attempts.length).toBeGreaterThanOrEqual(6);
    // Oldest first.
    const seqs = story.attempts.map((a) => a.sequence);
    expect([...seqs].sort((a, b) => Number(a - b))).toEqual(seqs);
  });

  it("pages newest first, filters failures and time, and refuses unknown destinations and bad tokens", async () => {
    const src = await stack.source("paging");
    let n = 0;
    // Every third call fails with 400 (dead at once), the rest succeed.
    const r = await receiver(() => (++n % 3 === 0 ? { status: 400 } : { status: 200 }));
    await stack.destination({ id: "pages", sourceIds: [src.id], urls: [r.url()] });
    const sent: string[] = [];
    for (let i = 0; i < 12; i++) {
      sent.push((await src.client.track({ userId: `u-${i}`, event: "Paged" })).messageId);
      // One at a time, so the log's order is the send order.
      await r.waitFor(i + 1);
    }
    await attemptsOf("pages", 12);
    const seen: bigint[] = [];
    let token = "";
    const pages: number[] = [];
    do {
      const page = await stack.admin.listAttempts({ destinationId: "pages", pageSize: 5, pageToken: token });
      pages.push(page.attempts.length);
      seen.push(...page.attempts.map((a) => a.sequence));
      token = page.nextPageToken;
    } while (token !== "");
    expect(pages).toEqual([5, 5, 2]);
    expect([...seen].sort((a, b) => Number(b - a))).toEqual(seen);
    const all = (await stack.admin.listAttempts({ destinationId: "pages", pageSize: 100 })).attempts;
    expect(all.map((a) => a.messageId)).toEqual([...sent].reverse());

    const failed = (await stack.admin.listAttempts({ destinationId: "pages", failedOnly: true })).attempts;
    expect(failed).toHaveLength(4);
    expect(failed.every((a) => a.status === 400 && a.reason === "400 is not retried")).toBe(true);
    const future = timestampFromDate(new Date(Date.now() + 3_600_000));
    expect((await stack.admin.listAttempts({ destinationId: "pages", since: future })).attempts).toEqual([]);
    const byMessage = await stack.admin.listAttempts({ messageId: sent[4]! });
    expect(byMessage.attempts.map((a) => a.destinationId)).toEqual(["pages"]);

    expect(await code(stack.admin.listAttempts({ destinationId: "no-such-dest" }))).toBe("NOT_FOUND");
    expect(await code(stack.admin.listAttempts({ destinationId: "pages", pageToken: "abc" }))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(await code(stack.admin.getMessage({ messageId: "never-sent" }))).toBe("NOT_FOUND");
  });

  it("tells filtered, no-destination and paused (pending) messages apart", async () => {
    const lonely = await stack.source("lonely");
    const none = await lonely.client.track({ userId: "u", event: "Nobody listens" });
    await until(async () => (await code(stack.admin.getMessage({ messageId: none.messageId }))) === "OK");
    const alone = await stack.admin.getMessage({ messageId: none.messageId });
    expect(alone).toMatchObject({ noDestination: true, deliveries: [] });

    const src = await stack.source("states");
    const r = await receiver(() => ({ status: 200 }));
    await stack.destination({ id: "st-paused", sourceIds: [src.id], urls: [r.url()], enabled: false });
    const filtered = await src.client.track({
      userId: "u",
      event: "Hidden",
      integrations: { Webhooks: false },
    });
    const pending = await src.client.track({ userId: "u", event: "Waits" });
    await until(async () => (await code(stack.admin.getMessage({ messageId: pending.messageId }))) === "OK");
    expect((await stack.admin.getMessage({ messageId: pending.messageId })).deliveries).toEqual([
      expect.objectContaining({ destinationId: "st-paused", state: DeliveryState.PENDING, attempts: 0 }),
    ]);
    await until(async () => (await code(stack.admin.getMessage({ messageId: filtered.messageId }))) === "OK");
    expect((await stack.admin.getMessage({ messageId: filtered.messageId })).deliveries).toEqual([
      expect.objectContaining({ destinationId: "st-paused", state: DeliveryState.FILTERED }),
    ]);
    // Paused: the call waits and counts as backlog.
    const [h] = (await stack.admin.listDestinationHealth({ destinationId: "st-paused" })).destinations;
    expect(h).toMatchObject({ state: DestinationState.PAUSED, backlog: 1n });
    expect(h!.oldestWaitingTime).toBeDefined();
    expect(r.requests).toHaveLength(0);
  });

  it("sums a destination's health from known traffic", async () => {
    const src = await stack.source("health");
    let fail = true;
    const r = await receiver(() => (fail ? { status: 400, body: "nope" } : { status: 200 }));
    await stack.destination({ id: "hl", sourceIds: [src.id], urls: [r.url()] });
    for (let i = 0; i < 3; i++) await src.client.track({ userId: "u", event: "Bad" });
    await r.waitFor(3);
    // Counted, and acked: the first call went through a partition (the others were the router's own
    // attempts, never stored), and it leaves the backlog once its dead letter is written, which
    // can come after the summary counting the later calls' failures.
    await until(async () => {
      const [h] = (await stack.admin.listDestinationHealth({ destinationId: "hl" })).destinations;
      return h?.failures5m === 3 && h.backlog === 0n;
    });
    let [h] = (await stack.admin.listDestinationHealth({ destinationId: "hl" })).destinations;
    expect(h).toMatchObject({
      destinationId: "hl",
      state: DestinationState.FAILING,
      deliveries5m: 0,
      failures5m: 3,
      failures1h: 3,
      consecutiveFailures: 3,
      lastFailureReason: "400 is not retried",
      successRate1h: 0,
      backlog: 0n,
    });
    fail = false;
    for (let i = 0; i < 2; i++) await src.client.track({ userId: "u", event: "Good" });
    await until(async () => {
      const [x] = (await stack.admin.listDestinationHealth({ destinationId: "hl" })).destinations;
      return x?.deliveries5m === 2;
    });
    [h] = (await stack.admin.listDestinationHealth({ destinationId: "hl" })).destinations;
    expect(h).toMatchObject({
      state: DestinationState.DELIVERING,
      deliveries1h: 2,
      failures1h: 3,
      consecutiveFailures: 0,
      successRate1h: 0.4,
    });
    expect(h!.lastSuccessTime).toBeDefined();
    expect(h!.minutes).toHaveLength(60);
    expect(h!.minutes.reduce((n, m) => n + m.delivered + m.failed, 0)).toBe(5);
    expect(h!.incomingPerSecond).toBeCloseTo(5 / 60, 5);
    expect(h!.deliveredPerSecond).toBeCloseTo(2 / 60, 5);
    const everyone = (await stack.admin.listDestinationHealth({})).destinations.map((d) => d.destinationId);
    expect(everyone).toContain("hl");
    expect(await code(stack.admin.listDestinationHealth({ destinationId: "nope" }))).toBe("NOT_FOUND");
  });
});

describe("dead letters", () => {
  it("lists across destinations, replays by time range, and refuses unknown destinations and sequences", async () => {
    const src = await stack.source("dead");
    const r = await receiver(() => ({ status: 422 }));
    await stack.destination({ id: "dl-a", sourceIds: [src.id], urls: [r.url()] });
    await stack.destination({ id: "dl-b", sourceIds: [src.id], urls: [r.url()] });
    await src.client.track({ userId: "u", event: "First" });
    await until(
      async () =>
        (await stack.admin.listDeadLetters({})).deadLetters.filter((l) => l.destinationId.startsWith("dl-"))
          .length === 2,
    );
    const between = new Date();
    await until(async () => Date.now() > between.getTime() + 5);
    await src.client.track({ userId: "u", event: "Second" });
    const mine = async () =>
      (await stack.admin.listDeadLetters({})).deadLetters.filter((l) => l.destinationId.startsWith("dl-"));
    await until(async () => (await mine()).length === 4);
    expect(new Set((await mine()).map((l) => l.destinationId))).toEqual(new Set(["dl-a", "dl-b"]));

    // Only dl-a's letters that died before `between`: one.
    r.respond = () => ({ status: 200 });
    const replayed = await stack.admin.replayDeadLetters({
      destinationId: "dl-a",
      until: timestampFromDate(between),
    });
    expect(replayed.replayed).toBe(1);
    await r.waitFor(5);
    const left = await mine();
    expect(left.filter((l) => l.destinationId === "dl-a")).toHaveLength(1);
    expect(
      timestampDate(left.find((l) => l.destinationId === "dl-a")!.deadTime!).getTime(),
    ).toBeGreaterThanOrEqual(between.getTime());
    const since = await stack.admin.replayDeadLetters({
      destinationId: "dl-b",
      since: timestampFromDate(between),
    });
    expect(since.replayed).toBe(1);

    expect(await code(stack.admin.listDeadLetters({ destinationId: "nope" }))).toBe("NOT_FOUND");
    expect(await code(stack.admin.replayDeadLetters({ destinationId: "nope" }))).toBe("NOT_FOUND");
    expect(await code(stack.admin.replayDeadLetters({ destinationId: "dl-a", sequences: [999_999n] }))).toBe(
      "NOT_FOUND",
    );
  });
});

describe("a call delivered directly to its one destination", () => {
  // docs/design/attempt-log-messages.md: its routing record and its attempt are one message on
  // ATTEMPTS, and every reader sees both as before.
  it("is one log message, read back as its routing record and its attempt", async () => {
    const src = await stack.source("one-message");
    const rx = await receiver(() => ({ status: 200 }));
    await stack.destination({ id: "one-message", sourceIds: [src.id], urls: [rx.url()] });
    const jsm = await stack.nc.jetstreamManager();
    const storedAt = async (sequence: bigint) =>
      (await jsm.streams.getMessage(ATTEMPTS_STREAM, { seq: Number(sequence) })).json<AttemptRecord>();
    // The destination's first call goes through storage (not known to answer yet); later ones are
    // attempted by the router itself once it is.
    let messageId = "";
    let record: AttemptRecord | undefined;
    let sent = 0;
    await until(
      async () => {
        messageId = (await src.client.track({ userId: "one-user", event: "Paid", properties: { n: sent } }))
          .messageId;
        sent++;
        const attempt = (await attemptsOf("one-message", sent)).find((a) => a.messageId === messageId)!;
        record = await storedAt(attempt.sequence);
        return record.routed !== undefined;
      },
      { timeout: 30_000, message: "a call delivered directly" },
    );
    const body = rx.requests.at(-1)!.body.toString("utf8");
    expect(record).toMatchObject({
      kind: "attempt",
      messageId,
      destinationId: "one-message",
      outcome: "success",
      routed: { destinations: ["one-message"] },
      requestBody: body,
    });
    // No routing record of its own: the source's newest one is an earlier call's.
    const routedLast = await jsm.streams.getMessage(ATTEMPTS_STREAM, {
      last_by_subj: routedRecordSubject(src.id),
    });
    expect(routedLast.json<RoutedRecord>().messageId).not.toBe(messageId);

    const story = await stack.admin.getMessage({ messageId });
    expect(story).toMatchObject({ sourceId: src.id, body, noDestination: false });
    expect(story.deliveries.map((d) => [d.destinationId, d.state])).toEqual([
      ["one-message", DeliveryState.DELIVERED],
    ]);
    expect(story.attempts.map((a) => [a.messageId, a.status, a.requestBody])).toEqual([
      [messageId, 200, body],
    ]);
    const listed = (await stack.admin.listAttempts({ messageId })).attempts;
    expect(listed.map((a) => [a.destinationId, a.requestBody])).toEqual([["one-message", body]]);
    const found = await stack.admin.searchAttempts({ userId: "one-user", destinationId: "one-message" });
    expect(found.entries.filter((e) => e.messageId === messageId).map((e) => e.status)).toEqual([
      LogStatus.DELIVERED,
    ]);
  });

  it("keeps two messages when the destination's mapping changed the body: each body stays with its record", async () => {
    const src = await stack.source("one-mapped");
    const rx = await receiver(() => ({ status: 200 }));
    await stack.destination({
      id: "one-mapped",
      sourceIds: [src.id],
      urls: [rx.url()],
      mapping: `{"e": event}`,
    });
    const direct = async () =>
      (await stack.dispatchers[0]!.metrics.direct.get()).values.find((v) => v.labels.outcome === "done")
        ?.value ?? 0;
    const jsm = await stack.nc.jetstreamManager();
    // Calls one at a time until one was attempted by the router itself.
    let sent = 0;
    let messageId = "";
    let attempt: Awaited<ReturnType<typeof attemptsOf>>[number] | undefined;
    const before = await direct();
    await until(
      async () => {
        messageId = (await src.client.track({ userId: "m", event: `Mapped ${sent}` })).messageId;
        sent++;
        attempt = (await attemptsOf("one-mapped", sent)).find((a) => a.messageId === messageId);
        return (await direct()) > before;
      },
      { timeout: 30_000, message: "a mapped call delivered directly" },
    );
    const sentBody = rx.requests.at(-1)!.body.toString("utf8");
    expect(JSON.parse(sentBody)).toEqual({ e: `Mapped ${sent - 1}` });
    const stored = (
      await jsm.streams.getMessage(ATTEMPTS_STREAM, { seq: Number(attempt!.sequence) })
    ).json<AttemptRecord>();
    expect(stored.routed).toBeUndefined();
    expect(stored.requestBody).toBe(sentBody);
    const story = await stack.admin.getMessage({ messageId });
    // The call's body is the routed one (the call as rendered), the attempt's what was sent.
    expect(JSON.parse(story.body)).toMatchObject({ type: "track", event: `Mapped ${sent - 1}` });
    expect(story.attempts.map((a) => a.requestBody)).toEqual([sentBody]);
  });
});

describe("ATTEMPT_LOG_BODIES=off", () => {
  it("keeps everything but the request body", async () => {
    const quiet = await Stack.start({ dispatcher: { attemptLogBodies: false } });
    try {
      const src = await quiet.source("private");
      await quiet.destination({ id: "priv", sourceIds: [src.id] });
      const { messageId } = await src.client.track({ userId: "u", event: "Secret" });
      await quiet.receiver.waitFor(1);
      let list: Awaited<ReturnType<typeof quiet.admin.listAttempts>>["attempts"] = [];
      await until(async () => {
        list = (await quiet.admin.listAttempts({ destinationId: "priv" })).attempts;
        return list.length === 1;
      });
      expect(list[0]).toMatchObject({ messageId, status: 200, requestBody: "" });
      expect((await quiet.admin.getMessage({ messageId })).body).toBe("");
    } finally {
      await quiet.close();
    }
  });
});
