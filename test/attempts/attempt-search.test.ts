import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ConsentMissing,
  type LogEntry,
  LogStatus,
  type SearchAttemptsRequestSchema,
  UpdateDestinationRequestSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  ATTEMPTS_STREAM,
  type AttemptRecord,
  attemptSubject,
  messageHash,
  type RoutedRecord,
  routedSubject,
} from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { code } from "../helpers/grpc-code.js";
import { Receiver } from "../helpers/receiver.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// Searching the attempt log end to end (issue 28): real ingest, NATS, dispatcher and receivers
// make every status for real — delivered, failed (retried), dead-lettered (422), filtered by the
// call's integrations, by consent, by the destination's filter at routing and by a filter changed
// while the call waited — and SearchAttempts finds each by every filter, page by page.

let stack: Stack;
const receivers: Receiver[] = [];
let src: Awaited<ReturnType<Stack["source"]>>;
let other: Awaited<ReturnType<Stack["source"]>>;
const ids: Record<string, string> = {};
let started: Date;

async function receiver(respond: Receiver["respond"]): Promise<Receiver> {
  const r = await Receiver.http();
  r.respond = respond;
  receivers.push(r);
  return r;
}

type Req = MessageInitShape<typeof SearchAttemptsRequestSchema>;

/** Every entry of a search, page by page (page_size 2, so that paging is exercised). */
async function all(req: Req): Promise<LogEntry[]> {
  const out: LogEntry[] = [];
  let pageToken = "";
  do {
    const page = await stack.admin.searchAttempts({ pageSize: 2, ...req, pageToken });
    expect(page.entries.length).toBeLessThanOrEqual(2);
    out.push(...page.entries);
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  const seqs = out.map((e) => e.sequence);
  expect(seqs, "newest first").toEqual([...seqs].sort((a, b) => Number(b - a)));
  return out;
}

const line = (e: LogEntry) => `${e.messageId} ${e.destinationId} ${LogStatus[e.status]}`;
const lines = async (req: Req) => (await all(req)).map(line).sort();
/** The lines of these calls (by their name in `ids`) at one destination, all with one status. */
const at = (destinationId: string, status: keyof typeof LogStatus, ...calls: string[]) =>
  calls.map((c) => `${ids[c]} ${destinationId} ${status}`);
/** The shop's calls that reach its destinations (the hidden page turned webhooks off). */
const SHOP = ["identify", "order", "signup"];

beforeAll(async () => {
  started = new Date();
  // Failed deliveries retry far apart: they stay "failed" (one attempt) while the test looks (the
  // first retry after 5 to 10 min; a 60 s base could bring it after 30 s, within a loaded run).
  stack = await Stack.start({ dispatcher: { retryBaseDelayMs: 600_000 } });
  src = await stack.source("search-shop");
  other = await stack.source("search-other");
  const ok = await receiver(() => ({ status: 200 }));
  const broken = await receiver(() => ({ status: 503, body: "down" }));
  const gone = await receiver(() => ({ status: 422, body: "no" }));
  const later = await receiver(() => ({ status: 200 }));
  await stack.destination({ id: "s-ok", sourceIds: [src.id, other.id], urls: [ok.url()] });
  await stack.destination({ id: "s-broken", sourceIds: [src.id], urls: [broken.url()] });
  await stack.destination({ id: "s-gone", sourceIds: [src.id], urls: [gone.url()] });
  await stack.destination({
    id: "s-ads",
    sourceIds: [src.id],
    urls: [ok.url()],
    consentCategories: ["Advertising"],
    consentMissing: ConsentMissing.FILTER,
  });
  await stack.destination({
    id: "s-signups",
    sourceIds: [src.id],
    urls: [ok.url()],
    filter: { events: ["Signed Up"] },
  });
  await stack.destination({ id: "s-later", sourceIds: [other.id], urls: [later.url()], enabled: false });

  ids.order = (await src.client.track({ userId: "u1", event: "Order Completed" })).messageId;
  ids.signup = (await src.client.track({ userId: "u2", event: "Signed Up" })).messageId;
  ids.identify = (await src.client.identify({ userId: "u1", traits: { plan: "pro" } })).messageId;
  ids.hidden = (
    await src.client.page({ userId: "u3", name: "Pricing", integrations: { Webhooks: false } })
  ).messageId;
  // Waits on a paused destination; its filter then changes to refuse it; resumed, it is filtered at its attempt.
  ids.waits = (await other.client.track({ userId: "u4", event: "Waits" })).messageId;
  await until(
    async () =>
      (await stack.admin.getMessage({ messageId: ids.waits! }).catch(() => undefined)) !== undefined,
  );
  const upd = await stack.admin.updateDestination(
    create(UpdateDestinationRequestSchema, {
      destination: { id: "s-later", filter: { types: ["identify"] }, enabled: true },
      updateMask: { paths: ["filter", "enabled"] },
    }),
  );
  await stack.waitForDestination("s-later");
  expect(upd.destination?.enabled).toBe(true);

  // Every outcome is in the log: 5 entries for each of the 4 shop calls (and the 422 attempt
  // before each dead letter of the 3 sent), 2 for the other's.
  await until(
    async () => {
      const n = (await all({})).length;
      return n >= 25;
    },
    { timeout: 30_000, message: "every entry of the scenario in the log" },
  );
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

describe("SearchAttempts", () => {
  it("finds each status, recorded for real", async () => {
    expect(await lines({ statuses: [LogStatus.DELIVERED] })).toEqual(
      [
        ...at("s-ok", "DELIVERED", ...SHOP, "waits"),
        // The events filter holds back track calls only.
        ...at("s-signups", "DELIVERED", "identify", "signup"),
      ].sort(),
    );
    // A 422 is a failed attempt, then a dead letter.
    expect(await lines({ statuses: [LogStatus.FAILED] })).toEqual(
      [...at("s-broken", "FAILED", ...SHOP), ...at("s-gone", "FAILED", ...SHOP)].sort(),
    );
    expect(await lines({ statuses: [LogStatus.DEAD_LETTERED] })).toEqual(
      at("s-gone", "DEAD_LETTERED", ...SHOP).sort(),
    );
    const filtered = await all({ statuses: [LogStatus.FILTERED] });
    const reasons = Object.fromEntries(filtered.map((e) => [`${e.messageId} ${e.destinationId}`, e.reason]));
    expect(reasons).toEqual({
      // The call's integrations turned webhooks off: every destination of the source.
      [`${ids.hidden} s-ok`]: "integrations: webhooks turned off",
      [`${ids.hidden} s-broken`]: "integrations: webhooks turned off",
      [`${ids.hidden} s-gone`]: "integrations: webhooks turned off",
      [`${ids.hidden} s-ads`]: "integrations: webhooks turned off",
      [`${ids.hidden} s-signups`]: "integrations: webhooks turned off",
      // Consent not granted, at routing.
      [`${ids.order} s-ads`]: "consent: no consent object",
      [`${ids.signup} s-ads`]: "consent: no consent object",
      [`${ids.identify} s-ads`]: "consent: no consent object",
      // The destination's filter, at routing.
      [`${ids.order} s-signups`]: "filter: event",
      // The filter changed while the call waited: refused at its attempt.
      [`${ids.waits} s-later`]: expect.stringMatching(/^filtered: filter/),
    });
    const dead = (await all({ statuses: [LogStatus.DEAD_LETTERED] }))[0]!;
    expect(dead.deadLetterSequence).toBeGreaterThan(0n);
    const failed = (await all({ statuses: [LogStatus.FAILED], destinationId: "s-broken" }))[0]!;
    expect(failed.attempt).toMatchObject({
      status: 503,
      reason: "503 is retried",
      responseBody: "down",
      requestBody: "",
    });
    expect(failed.attempt!.nextAttemptTime).toBeDefined();
  });

  it("filters by destination, source, HTTP status and class, call type, event and user", async () => {
    expect(await lines({ destinationId: "s-gone" })).toEqual(
      [
        ...at("s-gone", "FILTERED", "hidden"),
        ...at("s-gone", "DEAD_LETTERED", ...SHOP),
        ...at("s-gone", "FAILED", ...SHOP),
      ].sort(),
    );
    const waits = [...at("s-later", "FILTERED", "waits"), ...at("s-ok", "DELIVERED", "waits")].sort();
    expect(await lines({ sourceId: other.id })).toEqual(waits);
    expect((await all({ httpStatus: 503 })).map((e) => e.httpStatus)).toEqual([503, 503, 503]);
    expect((await all({ httpStatusClass: 4 })).map((e) => e.httpStatus)).toEqual([422, 422, 422]);
    expect((await all({ httpStatusClass: 2 })).length).toBe(6);
    expect(await lines({ callType: "identify", statuses: [LogStatus.DELIVERED, LogStatus.FAILED] })).toEqual(
      [
        ...at("s-broken", "FAILED", "identify"),
        ...at("s-gone", "FAILED", "identify"),
        ...at("s-ok", "DELIVERED", "identify"),
        ...at("s-signups", "DELIVERED", "identify"),
      ].sort(),
    );
    const signups = await all({ event: "Signed Up" });
    expect(new Set(signups.map((e) => e.messageId))).toEqual(new Set([ids.signup]));
    expect(signups.every((e) => e.event === "Signed Up" && e.callType === "track")).toBe(true);
    expect(await all({ event: "signed up" })).toEqual([]);
    // u1 sent the order and the identify: every entry of both, and nothing of anyone else.
    const u1 = await all({ userId: "u1" });
    expect(new Set(u1.map((e) => e.messageId))).toEqual(new Set([ids.order, ids.identify]));
    expect(u1).toHaveLength(12);
    expect(await lines({ userId: "u1", destinationId: "s-broken" })).toEqual(
      at("s-broken", "FAILED", "identify", "order").sort(),
    );
    expect(await all({ userId: "nobody" })).toEqual([]);
    expect(await lines({ messageId: ids.waits! })).toEqual(waits);
  });

  it("bounds by time range", async () => {
    const everything = await all({});
    const future = timestampFromDate(new Date(Date.now() + 3_600_000));
    expect(await all({ since: future })).toEqual([]);
    expect(await all({ until: timestampFromDate(started) })).toEqual([]);
    const window = await all({ since: timestampFromDate(started), until: future });
    expect(window.map(line)).toEqual(everything.map(line));
    // The newest entry's time splits the log: before it, and from it on.
    const newest = everything[0]!;
    const from = await all({ since: newest.time! });
    const before = await all({ until: newest.time! });
    expect(from.length + before.length).toBe(everything.length);
    expect(from.map(line)).toContain(line(newest));
  });

  it("pages with stable tokens, tied to their filters", async () => {
    const first = await stack.admin.searchAttempts({ pageSize: 3 });
    expect(first.entries).toHaveLength(3);
    // A record stored after the first page does not shift the next one.
    await src.client.track({ userId: "u9", event: "Meanwhile" });
    await until(async () => (await stack.admin.searchAttempts({ userId: "u9" })).entries.length > 0);
    const second = await stack.admin.searchAttempts({ pageSize: 3, pageToken: first.nextPageToken });
    expect(second.entries[0]!.sequence).toBeLessThanOrEqual(first.entries[2]!.sequence);
    expect(second.entries.map(line)).not.toContain(line(first.entries[2]!));
    expect(
      await code(
        stack.admin.searchAttempts({ pageSize: 3, pageToken: first.nextPageToken, destinationId: "s-ok" }),
      ),
    ).toBe("INVALID_ARGUMENT");
    expect(await code(stack.admin.searchAttempts({ pageToken: "not-a-token" }))).toBe("INVALID_ARGUMENT");
    expect(await code(stack.admin.searchAttempts({ pageSize: 1001 }))).toBe("INVALID_ARGUMENT");
  });

  it("refuses bad filters and unknown ids instead of answering nothing", async () => {
    expect(await code(stack.admin.searchAttempts({ destinationId: "no-such" }))).toBe("NOT_FOUND");
    expect(await code(stack.admin.searchAttempts({ sourceId: "no-such" }))).toBe("NOT_FOUND");
    expect(await code(stack.admin.searchAttempts({ statuses: [9 as LogStatus] }))).toBe("INVALID_ARGUMENT");
    expect(await code(stack.admin.searchAttempts({ httpStatus: 42 }))).toBe("INVALID_ARGUMENT");
    expect(await code(stack.admin.searchAttempts({ httpStatus: 500, httpStatusClass: 5 }))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(await code(stack.admin.searchAttempts({ callType: "purchase" }))).toBe("INVALID_ARGUMENT");
    expect(await code(stack.admin.searchAttempts({ userId: "x".repeat(1025) }))).toBe("INVALID_ARGUMENT");
    const now = timestampFromDate(new Date());
    expect(await code(stack.admin.searchAttempts({ since: now, until: now }))).toBe("INVALID_ARGUMENT");
  });

  it("shows the log's retention and what it holds", async () => {
    // The index follows the log as records come; the test before sent a call whose last records
    // (and the health summary written after them) may have just been stored: caught up, not at once.
    const info = await until(
      async () => {
        const i = await stack.admin.getAttemptLogInfo({});
        return i.unindexedRecords === 0n && i;
      },
      { message: "the index caught up with the log" },
    );
    expect(durationMs(info.maxAge!)).toBe(3 * 86_400_000);
    expect(info.maxBytes).toBe(1024n ** 3n);
    expect(info.records).toBeGreaterThan(10n);
    expect(info.bytes).toBeGreaterThan(1000n);
    expect(info.oldestTime!.seconds).toBeLessThanOrEqual(info.newestTime!.seconds);
    expect(info.indexMaxBytes).toBe(1024n ** 3n / 4n);
  });

  it("finds records an older dispatcher wrote in the old subject layout (one subject per message hash)", async () => {
    const id = "old-layout-1";
    const time = new Date().toISOString();
    const routed: RoutedRecord = {
      kind: "routed",
      messageId: id,
      sourceId: src.id,
      receivedAt: time,
      time,
      destinations: ["s-broken"],
      filtered: false,
      body: '{"type":"track","event":"Old"}',
    };
    const attempt: AttemptRecord = {
      kind: "attempt",
      messageId: id,
      destinationId: "s-broken",
      sourceId: src.id,
      url: "http://127.0.0.1/old",
      attemptNumber: 1,
      startTime: time,
      durationMs: 7,
      outcome: "server_error",
      status: 502,
      reason: "502 is retried",
      retryable: true,
      responseBody: "bad gateway",
    };
    stack.nc.publish(routedSubject(messageHash(id)), JSON.stringify(routed));
    stack.nc.publish(attemptSubject("s-broken", messageHash(id)), JSON.stringify(attempt));
    await stack.nc.flush();
    await until(async () => (await stack.admin.searchAttempts({ messageId: id })).entries.length === 1);
    const [entry] = (await stack.admin.searchAttempts({ httpStatus: 502 })).entries;
    expect(entry).toMatchObject({
      messageId: id,
      destinationId: "s-broken",
      status: LogStatus.FAILED,
      callType: "",
    });
    // Without a call type in the record, type and event filters do not find it.
    expect((await stack.admin.searchAttempts({ callType: "track", httpStatus: 502 })).entries).toEqual([]);
    const message = await stack.admin.getMessage({ messageId: id });
    expect(message.body).toBe(routed.body);
    expect(message.attempts.map((a) => a.reason)).toEqual(["502 is retried"]);
    const listed = await stack.admin.listAttempts({ destinationId: "s-broken", messageId: id });
    expect(listed.attempts.map((a) => a.requestBody)).toEqual([routed.body]);
  });

  it("puts the log's subjects back when an older replica set its own list (a rolling upgrade)", async () => {
    const jsm = await stack.nc.jetstreamManager();
    const info = await jsm.streams.info(ATTEMPTS_STREAM);
    const older = ["hookpost.attempts.>", "hookpost.routed.>", "hookpost.health.>"];
    await jsm.streams.update(ATTEMPTS_STREAM, { ...info.config, subjects: older });
    // The API's stream check (every 10 s) adds the new subjects back.
    await until(
      async () => (await jsm.streams.info(ATTEMPTS_STREAM)).config.subjects.includes("hookpost.log.>"),
      {
        timeout: 40_000,
        message: "the attempt log's subjects restored",
      },
    );
    const { messageId } = await src.client.track({ userId: "u-after", event: "After" });
    await until(async () => (await stack.admin.searchAttempts({ messageId })).entries.length >= 5, {
      message: "the new call's entries in the log",
    });
  }, 60_000);
});
