import { EVENT_TYPES } from "@hookpost/contract";
import {
  ATTEMPT_INDEX_HEAD_SUBJECT,
  ATTEMPT_INDEX_STREAM,
  ATTEMPTS_STREAM,
  AttemptIndex,
  type AttemptRecord,
  AttemptSearch,
  attemptRecordSubject,
  attemptSubject,
  type Cursor,
  DEFAULT_TOPOLOGY,
  type DeadRecord,
  deadRecordSubject,
  ensureTopology,
  type LogRecord,
  messageHash,
  type RoutedRecord,
  routedRecordSubject,
  routedSubject,
  type SearchFilter,
  STATUS,
  type StatusCode,
  userHash,
} from "@hookpost/core";
import fc from "fast-check";
import type { JetStreamManager } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";

// The attempt log's search index against a naive filter over every record: random records (every
// kind, status, facet, time, old and new subject layouts), random filters and page sizes, with
// small segments so that queries go through written level-0 segments, merged level-1 groups and
// the segment still in memory. Two replicas index the same log and write each segment once.

const nats = useNats();
/**
 * 64 sequences per segment, 4 segments per group: 1 500 records make ~23 segments and 5 groups;
 * postings of up to 2 entries inline in the header, the others read from the index stream.
 */
const SPANS = { l0: 64, group: 4, inline: 2 };
const RECORDS = 1500;
const T0 = Date.parse("2026-11-20T00:00:00Z");
const HOUR = 3_600_000;

const DESTS = ["d1", "d2", "d3"];
const SOURCES = ["s1", "s2"];
const USERS = ["u1", "u2", "u3", "u4", "u5"];
const EVENTS = ["Order Completed", "Signed Up", "é ✓ long event name with spaces"];
const OUTCOMES = ["success", "server_error", "client_error", "timeout", "filtered", "not_sent"] as const;
const HTTP = [0, 200, 201, 400, 404, 500, 503];

let jsm: JetStreamManager;
let index: AttemptIndex;
let second: AttemptIndex;
let search: AttemptSearch;
/** Every record published, with its sequence. */
const published: { seq: number; r: LogRecord }[] = [];

const common = fc.record({
  messageId: fc.integer({ min: 0, max: 299 }).map((i) => `m-${i}`),
  sourceId: fc.constantFrom(...SOURCES),
  user: fc.option(fc.constantFrom(...USERS), { nil: undefined }),
  callType: fc.option(fc.constantFrom(...EVENT_TYPES), { nil: undefined }),
  event: fc.constantFrom(...EVENTS),
  // Records come roughly in time order, with some out of order (replicas' clocks, retries).
  minute: fc.integer({ min: -30, max: 30 }),
});

const recordArb = fc.tuple(
  fc.constantFrom("attempt", "attempt", "attempt", "dead", "routed", "routed"),
  common,
  fc.constantFrom(...DESTS),
  fc.constantFrom(...OUTCOMES),
  fc.constantFrom(...HTTP),
  fc.subarray(DESTS),
  fc.boolean(),
  fc.subarray(DESTS),
  fc.boolean(),
);

function makeRecord(i: number, v: unknown): LogRecord {
  const [kind, c, dest, outcome, http, destinations, filtered, consent, oldLayout] = v as [
    string,
    { messageId: string; sourceId: string; user?: string; callType?: string; event: string; minute: number },
    string,
    (typeof OUTCOMES)[number],
    number,
    string[],
    boolean,
    string[],
    boolean,
  ];
  const time = new Date(T0 + i * 10_000 + c.minute * 60_000).toISOString();
  const facts = {
    messageId: c.messageId,
    sourceId: c.sourceId,
    ...(c.user ? { userHash: userHash({ userId: c.user }) } : {}),
    ...(c.callType ? { callType: c.callType } : {}),
    ...(c.callType === "track" ? { event: c.event } : {}),
  };
  const base = { ...facts, _old: oldLayout } as const;
  if (kind === "attempt") {
    return {
      ...base,
      kind: "attempt",
      destinationId: dest,
      url: "http://127.0.0.1/hook",
      attemptNumber: 1,
      startTime: time,
      durationMs: 5,
      outcome,
      status: outcome === "success" ? 200 : http,
      reason: `reason ${i}`,
      retryable: false,
      responseBody: "",
    } as AttemptRecord;
  }
  if (kind === "dead") {
    return {
      ...base,
      kind: "dead",
      destinationId: dest,
      deadSequence: i,
      reason: "dead",
      time,
    } as DeadRecord;
  }
  return {
    ...base,
    kind: "routed",
    receivedAt: time,
    time,
    destinations,
    filtered,
    ...(consent.length > 0
      ? { consentFiltered: consent.map((d) => ({ destinationId: d, reason: `consent ${d}` })) }
      : {}),
  } as RoutedRecord;
}

function subjectOf(r: LogRecord & { _old?: boolean }): string {
  if (r._old) {
    return r.kind === "routed"
      ? routedSubject(messageHash(r.messageId))
      : attemptSubject(r.destinationId, messageHash(r.messageId));
  }
  if (r.kind === "routed") return routedRecordSubject(r.sourceId);
  return r.kind === "dead" ? deadRecordSubject(r.destinationId) : attemptRecordSubject(r.destinationId);
}

/**
 * An attempt's status by its outcome, as the design's table has it (docs/design/attempt-search.md,
 * "What is indexed"); any other outcome is `failed`, retried or not.
 */
const ATTEMPT_STATUS: Partial<Record<AttemptRecord["outcome"], StatusCode>> = {
  success: STATUS.delivered,
  filtered: STATUS.filteredAtAttempt,
};

/** The naive answer: every entry of every record, written out without the index's code. */
function naive(f: SearchFilter): string[] {
  const out: { seq: number; dest: string }[] = [];
  for (const { seq, r } of published) {
    const time = Date.parse(r.kind === "attempt" ? r.startTime : r.time);
    const entries: { dest: string; status: StatusCode; http: number }[] = [];
    if (r.kind === "attempt") {
      entries.push({
        dest: r.destinationId,
        status: ATTEMPT_STATUS[r.outcome] ?? STATUS.failed,
        http: r.status,
      });
    } else if (r.kind === "dead") {
      entries.push({ dest: r.destinationId, status: STATUS.deadLettered, http: 0 });
    } else if (r.kind === "routed") {
      const dests = new Set([
        ...(r.filtered ? r.destinations : []),
        ...(r.consentFiltered ?? []).map((c) => c.destinationId),
      ]);
      for (const d of dests) entries.push({ dest: d, status: STATUS.filteredAtRouting, http: 0 });
    }
    for (const e of entries) {
      if (f.destinationId !== undefined && e.dest !== f.destinationId) continue;
      if (f.sourceId !== undefined && r.sourceId !== f.sourceId) continue;
      if (f.statuses && !f.statuses.includes(e.status)) continue;
      if (f.httpMin !== undefined && e.http < f.httpMin) continue;
      if (f.httpMax !== undefined && e.http > f.httpMax) continue;
      if (f.callType !== undefined && r.callType !== f.callType) continue;
      if (f.event !== undefined && !(r.callType === "track" && r.event === f.event)) continue;
      if (f.userId !== undefined && r.userHash !== userHash({ userId: f.userId })) continue;
      if (f.messageId !== undefined && r.messageId !== f.messageId) continue;
      if (f.sinceMs !== undefined && time < f.sinceMs) continue;
      if (f.untilMs !== undefined && time >= f.untilMs) continue;
      out.push({ seq, dest: e.dest });
    }
  }
  return out.sort((a, b) => b.seq - a.seq || a.dest.localeCompare(b.dest)).map((e) => `${e.seq}/${e.dest}`);
}

/** Every page of a search, and whether pages came newest first without repeats. */
async function allPages(s: AttemptSearch, f: SearchFilter, pageSize: number): Promise<string[]> {
  const seen: { seq: number; dest: string }[] = [];
  let after: Cursor | undefined;
  for (let pages = 0; pages < 2000; pages++) {
    const page = await s.search(f, { pageSize, ...(after ? { after } : {}) });
    expect(page.hits.length).toBeLessThanOrEqual(pageSize);
    seen.push(...page.hits.map((h) => ({ seq: h.record.sequence, dest: h.entry!.destinationId })));
    if (!page.next) break;
    after = page.next;
  }
  const seqs = seen.map((e) => e.seq);
  expect(seqs).toEqual([...seqs].sort((a, b) => b - a));
  const keys = seen.map((e) => `${e.seq}/${e.dest}`);
  expect(new Set(keys).size).toBe(keys.length);
  return seen.sort((a, b) => b.seq - a.seq || a.dest.localeCompare(b.dest)).map((e) => `${e.seq}/${e.dest}`);
}

/** One to three filters at once (more match nothing in 1 500 records), with any values. */
const filterArb: fc.Arbitrary<SearchFilter> = fc
  .record({
    keys: fc.subarray(
      [
        "destinationId",
        "sourceId",
        "statuses",
        "http",
        "callType",
        "event",
        "userId",
        "messageId",
        "since",
        "until",
      ],
      { minLength: 1, maxLength: 3 },
    ),
    destinationId: fc.constantFrom(...DESTS, "d-none"),
    sourceId: fc.constantFrom(...SOURCES),
    statuses: fc.subarray([0, 1, 2, 3, 4] as StatusCode[], { minLength: 1 }),
    http: fc.constantFrom([200, 200], [500, 599], [400, 499], [0, 0]),
    callType: fc.constantFrom(...EVENT_TYPES),
    event: fc.constantFrom(...EVENTS),
    userId: fc.constantFrom(...USERS, "nobody"),
    messageId: fc.integer({ min: 0, max: 310 }).map((i) => `m-${i}`),
    since: fc.integer({ min: -1, max: 5 }),
    until: fc.integer({ min: 0, max: 6 }),
  })
  .map(({ keys, http, since, until, ...v }) => {
    const f: SearchFilter = {};
    const has = (k: string) => keys.includes(k);
    if (has("destinationId")) f.destinationId = v.destinationId;
    if (has("sourceId")) f.sourceId = v.sourceId;
    if (has("statuses")) f.statuses = v.statuses;
    if (has("http")) Object.assign(f, { httpMin: http[0], httpMax: http[1] });
    if (has("callType")) f.callType = v.callType;
    if (has("event")) f.event = v.event;
    if (has("userId")) f.userId = v.userId;
    if (has("messageId")) f.messageId = v.messageId;
    if (has("since")) f.sinceMs = T0 + since * HOUR;
    if (has("until")) f.untilMs = T0 + until * HOUR;
    return f;
  });

beforeAll(async () => {
  jsm = await nats.nc.jetstreamManager();
  await ensureTopology(jsm, DEFAULT_TOPOLOGY);
  index = await AttemptIndex.open(nats.nc, { logger: quietLogger, spans: SPANS, jitterMs: 0 });
  second = await AttemptIndex.open(nats.nc, { logger: quietLogger, spans: SPANS, jitterMs: 0 });
  search = new AttemptSearch(jsm, index);
  const values = fc.sample(recordArb, { numRuns: RECORDS, seed: 28 });
  const js = nats.nc.jetstream();
  for (let i = 0; i < values.length; i++) {
    const r = makeRecord(i, values[i]);
    const { _old, ...stored } = r as LogRecord & { _old?: boolean };
    const ack = await js.publish(subjectOf(r), JSON.stringify(stored));
    published.push({ seq: ack.seq, r: stored as LogRecord });
  }
  const last = published.at(-1)!.seq;
  // Every complete segment written and merged, by either replica.
  await until(() => index.followed >= last && second.followed >= last, {
    message: "both replicas follow the log",
  });
  const complete = Math.floor(last / SPANS.l0);
  const groups = Math.floor(last / (SPANS.l0 * SPANS.group));
  await until(
    () => index.stats().l0 >= complete && index.stats().l1 >= groups && second.stats().l1 >= groups,
    {
      timeout: 30_000,
      message: `${complete} segments and ${groups} groups written`,
    },
  );
}, 120_000);

afterAll(() => {
  index?.close();
  second?.close();
});

describe("attempt search index", () => {
  it("answers every filter like a naive filter over all records, page by page", async () => {
    let found = 0;
    await fc.assert(
      fc.asyncProperty(filterArb, fc.integer({ min: 1, max: 60 }), async (f, pageSize) => {
        const want = naive(f);
        expect(await allPages(search, f, pageSize)).toEqual(want);
        if (want.length > 0) found++;
      }),
      { numRuns: 150, seed: 2028 },
    );
    // Most filters find something: the comparison is not of empty lists.
    expect(found).toBeGreaterThan(75);
  }, 300_000);

  it("reads each filter alone like the naive filter (each filter, and time ranges)", async () => {
    const single: SearchFilter[] = [
      {},
      { destinationId: "d2" },
      { sourceId: "s1" },
      { statuses: [STATUS.delivered] },
      { statuses: [STATUS.failed] },
      { statuses: [STATUS.filteredAtAttempt, STATUS.filteredAtRouting] },
      { statuses: [STATUS.deadLettered] },
      { httpMin: 503, httpMax: 503 },
      { httpMin: 400, httpMax: 499 },
      { callType: "track" },
      { callType: "identify" },
      { event: "Order Completed" },
      { event: EVENTS[2]! },
      { userId: "u3" },
      { messageId: "m-17" },
      { sinceMs: T0 + HOUR, untilMs: T0 + 2 * HOUR },
      { sinceMs: T0 + 3 * HOUR },
      { untilMs: T0 },
    ];
    for (const f of single) {
      const want = naive(f);
      expect(await allPages(search, f, 25), JSON.stringify(f)).toEqual(want);
      expect(want.length, `${JSON.stringify(f)} finds something`).toBeGreaterThan(0);
    }
  }, 120_000);

  it("writes each segment once with two replicas, and the second answers the same", async () => {
    const heads: number[] = [];
    let seq = 1;
    for (;;) {
      try {
        const m = await jsm.streams.getMessage(ATTEMPT_INDEX_STREAM, {
          seq,
          next_by_subj: ATTEMPT_INDEX_HEAD_SUBJECT,
        } as unknown as { seq: number });
        const h = JSON.parse(new TextDecoder().decode(m.data)) as { level: number; lo: number };
        heads.push(h.level * 1e9 + h.lo);
        seq = m.seq + 1;
      } catch {
        break;
      }
    }
    expect(heads.length).toBeGreaterThan(20);
    // Caught up: nothing left to index (the lag metric).
    expect([index.lag, second.lag]).toEqual([0, 0]);
    expect(new Set(heads).size).toBe(heads.length);
    const other = new AttemptSearch(jsm, second);
    for (const f of [
      { userId: "u2" },
      { destinationId: "d1", statuses: [STATUS.failed] },
    ] as SearchFilter[]) {
      expect(await allPages(other, f, 10)).toEqual(naive(f));
    }
  });

  it("finds every record of a message in either layout, and a replica opened later answers the same", async () => {
    const id = "m-42";
    const want = published.filter((p) => p.r.messageId === id).map((p) => p.seq);
    expect(want.length).toBeGreaterThan(1);
    const found = await search.forMessage(id);
    expect(found.records.map((r) => r.sequence)).toEqual(want);
    const fresh = await AttemptIndex.open(nats.nc, { logger: quietLogger, spans: SPANS, jitterMs: 0 });
    try {
      // It loads the written segments and follows from the end of the last one.
      expect(fresh.stats().l0).toBeGreaterThanOrEqual(index.stats().l0);
      const again = await new AttemptSearch(jsm, fresh).forMessage(id);
      expect(again.records.map((r) => r.sequence)).toEqual(want);
    } finally {
      fresh.close();
    }
  });

  it("skips records erased after they were indexed", async () => {
    const f: SearchFilter = { userId: "u4", statuses: [STATUS.delivered] };
    const before = await allPages(search, f, 50);
    expect(before.length).toBeGreaterThan(1);
    const gone = Number(before[0]!.split("/")[0]);
    await jsm.streams.deleteMessage(ATTEMPTS_STREAM, gone, true);
    const i = published.findIndex((p) => p.seq === gone);
    published.splice(i, 1);
    expect(await allPages(search, f, 50)).toEqual(naive(f));
    expect(await allPages(search, f, 50)).toEqual(before.slice(1));
  });
});
