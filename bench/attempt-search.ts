/**
 * Searching the attempt log (issue 28, docs/design/attempt-search.md): fills HOOKPOST_ATTEMPTS
 * with a simulated day of calls (one routing record with its body and one attempt record per call,
 * times spread over 24 h), builds the index as an API replica does after a start (catching up),
 * then times typical and worst-case searches beside the 1 s target, and extrapolates to a day at
 * 1 000 calls/s (86.4 M calls, 173 M records) from what each query read.
 *
 *   npm run bench -- attempt-search [calls]      (default 2 500 000: 5 M records, ~5.5 GB)
 */
import { readFileSync } from "node:fs";
import type { AttemptRecord, DeadRecord, RoutedRecord, SearchFilter } from "@hookpost/core";
import {
  ATTEMPT_INDEX_STREAM,
  ATTEMPTS_STREAM,
  AttemptIndex,
  AttemptSearch,
  attemptRecordSubject,
  DEFAULT_SPANS,
  DEFAULT_TOPOLOGY,
  deadRecordSubject,
  ensureTopology,
  routedRecordSubject,
  STATUS,
  userHash,
} from "@hookpost/core";
import { connect } from "nats";
import pino from "pino";
import { NatsServer } from "../test/helpers/nats-server.js";
import { percentile, round, storedTrack } from "./payloads.js";
import { type Figure, printIfMain } from "./table.js";

const DAY_MS = 86_400_000;
const TARGET_MS = 1000;
const DESTINATIONS = 50;
const SOURCES = 10;
const USERS = 100_000;
const EVENTS = Array.from({ length: 20 }, (_, i) => (i === 0 ? "Order Completed" : `Event ${i}`));
/** Calls of the needle user over the whole fill, evenly spread. */
const NEEDLE_CALLS = 5;
/** One call in this many goes to the rare destination, answers 418, or is the rare event. */
const RARE_DEST_EVERY = 50_000;
const TEAPOT_EVERY = 400_000;
const RARE_EVENT_EVERY = 200_000;
/** A day at 1 000 calls/s. */
const DAY_CALLS = 86_400_000;
/** SearchAttempts' page deadline (services/api/admin/attempt-search.ts). */
const PAGE_DEADLINE_MS = 800;

/** Longer than nats-server keeps an idle block in memory (5 s): the next read loads it again. */
// not a wait: lets the server's block caches expire, so that the next run reads cold
const idle = () => new Promise((r) => setTimeout(r, 6000));

/** FNV-1a: a stable spread of call numbers over users, events, outcomes. */
function spread(i: number, salt: number): number {
  let h = 0x811c9dc5 ^ salt;
  for (let b = 0; b < 4; b++) {
    h ^= (i >>> (8 * b)) & 0xff;
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) / 2 ** 32;
}

interface Call {
  i: number;
  time: string;
  messageId: string;
  sourceId: string;
  destinationId: string;
  userId: string;
  type: "track" | "identify" | "page";
  event?: string;
}

function callOf(i: number, calls: number, t0: number): Call {
  const needleEvery = Math.floor(calls / NEEDLE_CALLS);
  const rare = i % RARE_DEST_EVERY === RARE_DEST_EVERY - 1;
  const d = rare ? "d-rare" : `d${Math.floor(spread(i, 1) * DESTINATIONS)}`;
  const r = spread(i, 2);
  const type = r < 0.8 ? "track" : r < 0.9 ? "identify" : "page";
  const event =
    i % RARE_EVENT_EVERY === RARE_EVENT_EVERY - 1
      ? "Rare Event"
      : EVENTS[Math.floor(spread(i, 3) ** 2 * EVENTS.length)]!;
  return {
    i,
    time: new Date(t0 + Math.floor((i / calls) * DAY_MS)).toISOString(),
    messageId: `bench-${i}`,
    sourceId: rare ? "s-rare" : `s${Number(d.slice(1)) % SOURCES}`,
    destinationId: d,
    userId: i % needleEvery === needleEvery / 2 ? "needle-user" : `user-${Math.floor(spread(i, 4) * USERS)}`,
    type,
    ...(type === "track" ? { event } : {}),
  };
}

/** The records one call leaves: its routing record (with its body), then an attempt or a dead letter. */
function recordsOf(c: Call): { subject: string; data: string }[] {
  const user = userHash({ userId: c.userId });
  const facts = {
    messageId: c.messageId,
    sourceId: c.sourceId,
    userHash: user,
    callType: c.type,
    ...(c.event ? { event: c.event } : {}),
  };
  const body = JSON.stringify({
    ...storedTrack(c.i, "bench", c.sourceId),
    type: c.type,
    userId: c.userId,
    event: c.event,
  });
  const r = spread(c.i, 5);
  const consent = r >= 0.997;
  const routed: RoutedRecord = {
    kind: "routed",
    ...facts,
    receivedAt: c.time,
    time: c.time,
    destinations: consent ? [] : [c.destinationId],
    filtered: false,
    ...(consent
      ? {
          consentFiltered: [{ destinationId: c.destinationId, reason: 'consent: "Advertising" not granted' }],
        }
      : {}),
    body,
  };
  const out = [{ subject: routedRecordSubject(c.sourceId), data: JSON.stringify(routed) }];
  if (consent) return out;
  if (r >= 0.995) {
    const dead: DeadRecord = {
      kind: "dead",
      ...facts,
      destinationId: c.destinationId,
      deadSequence: c.i,
      reason: "422 is not retried",
      time: c.time,
    };
    out.push({ subject: deadRecordSubject(c.destinationId), data: JSON.stringify(dead) });
    return out;
  }
  const teapot = c.i % TEAPOT_EVERY === TEAPOT_EVERY - 1;
  const failed = teapot || r >= 0.97;
  const status = teapot ? 418 : failed ? (r >= 0.985 ? 503 : 500) : 200;
  const attempt: AttemptRecord = {
    kind: "attempt",
    ...facts,
    destinationId: c.destinationId,
    url: `https://hooks.example.com/${c.destinationId}`,
    attemptNumber: 1,
    startTime: c.time,
    durationMs: 40 + Math.floor(r * 100),
    outcome: failed ? (status < 500 ? "client_error" : "server_error") : "success",
    status,
    reason: failed ? `${status} is retried` : "delivered (200)",
    retryable: failed,
    responseBody: failed ? '{"error":"upstream unavailable"}' : '{"ok":true}',
  };
  out.push({ subject: attemptRecordSubject(c.destinationId), data: JSON.stringify(attempt) });
  return out;
}

function rssMiB(pid: number | undefined): number {
  if (!pid) return Number.NaN;
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

export async function benchAttemptSearch(params: string[] = []): Promise<Figure[]> {
  const calls = Number(params[0] ?? 2_500_000);
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  const logger = pino({ level: "warn" });
  const figures: Figure[] = [];
  try {
    const jsm = await nc.jetstreamManager();
    await ensureTopology(jsm, {
      ...DEFAULT_TOPOLOGY,
      attemptLogMaxBytes: 30 * 1024 ** 3,
      attemptLogMaxAgeMs: 30 * DAY_MS,
    });
    const t0 = Date.now() - DAY_MS;

    console.error(`filling ATTEMPTS with ${calls.toLocaleString("en-US")} calls…`);
    const fillStart = performance.now();
    for (let i = 0; i < calls; i++) {
      for (const r of recordsOf(callOf(i, calls, t0))) nc.publish(r.subject, r.data);
      // Bounded in flight: the server stores as fast as it reads.
      if (i % 2000 === 1999) await nc.flush();
      if (i % 500_000 === 499_999) console.error(`  ${(i + 1).toLocaleString("en-US")} calls`);
    }
    await nc.flush();
    const fillS = (performance.now() - fillStart) / 1000;
    const log = await jsm.streams.info(ATTEMPTS_STREAM);
    const records = log.state.messages;
    figures.push(
      {
        name: "records stored (a day: 173 M)",
        value: records,
        unit: "records",
        note: `${calls.toLocaleString("en-US")} calls, times spread over 24 h`,
      },
      { name: "fill rate", value: Math.round(records / fillS), unit: "records/s" },
      {
        name: "log bytes per record",
        value: round(log.state.bytes / records, 1),
        unit: "bytes",
        note: `a day: ${round(((log.state.bytes / records) * 2 * DAY_CALLS) / 1e9, 0)} GB`,
      },
      {
        name: "nats-server memory after the fill",
        value: Math.round(rssMiB(server.pid)),
        unit: "MiB",
        note: `${log.state.num_subjects} subjects`,
      },
    );

    console.error("building the index (a replica catching up)…");
    const buildStart = performance.now();
    const index = await AttemptIndex.open(nc, { logger, jitterMs: 0 });
    const last = log.state.last_seq;
    const span = DEFAULT_SPANS.l0 * DEFAULT_SPANS.group;
    while (
      index.followed < last ||
      index.stats().l0 < Math.floor(last / DEFAULT_SPANS.l0) ||
      index.stats().l1 < Math.floor(last / span)
    ) {
      await new Promise((r) => setTimeout(r, 200));
    }
    const buildS = (performance.now() - buildStart) / 1000;
    const idx = await jsm.streams.info(ATTEMPT_INDEX_STREAM);
    const stats = index.stats();
    figures.push(
      {
        name: "index build (catch-up) rate",
        value: Math.round(records / buildS),
        unit: "records/s",
        note: `${stats.l0} segments, ${stats.l1} groups merged, ${stats.tail} records in memory`,
      },
      {
        name: "index bytes per record",
        value: round(idx.state.bytes / records, 1),
        unit: "bytes",
        note: `${round((100 * idx.state.bytes) / log.state.bytes, 1)} % of the log`,
      },
      {
        name: "API process memory with the index",
        value: Math.round(process.memoryUsage().rss / 1024 ** 2),
        unit: "MiB",
        note: "this process: filler and index",
      },
    );

    const search = new AttemptSearch(jsm, index);
    const needle = callOf(Math.floor(calls / 2), calls, t0);
    const queries: { name: string; worst: boolean; filter?: SearchFilter; message?: string }[] = [
      { name: "newest page, no filter", worst: false, filter: {} },
      { name: "status failed", worst: false, filter: { statuses: [STATUS.failed] } },
      { name: "destination d7", worst: false, filter: { destinationId: "d7" } },
      {
        name: "destination d7, failed",
        worst: false,
        filter: { destinationId: "d7", statuses: [STATUS.failed] },
      },
      {
        name: "event Order Completed, last hour",
        worst: false,
        filter: { event: "Order Completed", sinceMs: t0 + DAY_MS - 3_600_000 },
      },
      {
        name: "call type identify, dead-lettered",
        worst: false,
        filter: { callType: "identify", statuses: [STATUS.deadLettered] },
      },
      {
        name: "failed, 1 h window 12 h back",
        worst: false,
        filter: { statuses: [STATUS.failed], sinceMs: t0 + DAY_MS / 2, untilMs: t0 + DAY_MS / 2 + 3_600_000 },
      },
      { name: "a message's records (GetMessage)", worst: false, message: needle.messageId },
      { name: `user with ${NEEDLE_CALLS} calls in the day`, worst: true, filter: { userId: "needle-user" } },
      {
        name: "user with 5 calls, status delivered",
        worst: true,
        filter: { userId: "needle-user", statuses: [STATUS.delivered] },
      },
      {
        name: `HTTP 418 (1 call in ${TEAPOT_EVERY.toLocaleString("en-US")})`,
        worst: true,
        filter: { httpMin: 418, httpMax: 418 },
      },
      {
        name: `rare destination (1 call in ${RARE_DEST_EVERY.toLocaleString("en-US")}), page of 50`,
        worst: true,
        filter: { destinationId: "d-rare" },
      },
      {
        name: `rare event (1 call in ${RARE_EVENT_EVERY.toLocaleString("en-US")})`,
        worst: true,
        filter: { event: "Rare Event" },
      },
      {
        name: "filtered (consent), destination d3",
        worst: true,
        filter: { destinationId: "d3", statuses: [STATUS.filteredAtRouting, STATUS.filteredAtAttempt] },
      },
      {
        name: "nothing matches (d3, dead-lettered, rare event)",
        worst: true,
        filter: { destinationId: "d3", statuses: [STATUS.deadLettered], event: "Rare Event" },
      },
    ];
    // Cold: nats-server drops a block from memory 5 s after its last read, so each cold run
    // waits that long first and reads its blocks from the page cache again (what a search of old
    // records meets). The API ends a page after 0.8 s with what it found (its token continues).
    for (const q of queries) {
      const run = async (deadlineMs?: number) => {
        const before = index.data.reads;
        const t = performance.now();
        const found = q.message
          ? (await search.forMessage(q.message)).records.length
          : (await search.search(q.filter!, { pageSize: 50, ...(deadlineMs ? { deadlineMs } : {}) })).hits
              .length;
        return { ms: performance.now() - t, found, reads: index.data.reads - before };
      };
      await idle();
      const api = await run(PAGE_DEADLINE_MS);
      await idle();
      const cold = await run();
      const warm: number[] = [];
      for (let i = 0; i < 3; i++) warm.push((await run()).ms);
      figures.push({
        name: `${q.worst ? "worst" : "typical"}: ${q.name}`,
        value: round(cold.ms, 1),
        unit: "ms",
        limit: { name: "target", value: TARGET_MS },
        note: `cold, full page: ${cold.found} found; API page (0.8 s deadline) ${round(api.ms, 0)} ms with ${api.found}, ${api.reads} index reads; warm ${round(percentile(warm, 50), 1)} ms`,
      });
    }

    // Extrapolation: a key lookup over a day reads one level-1 part per group (41) and one
    // level-0 part per segment not merged yet (up to 63); a facet query's cost follows the page.
    const segmentsPerDay = Math.ceil((2 * DAY_CALLS) / DEFAULT_SPANS.l0);
    const groupsPerDay = Math.floor(segmentsPerDay / DEFAULT_SPANS.group);
    const readMs = await timeIndexReads(index, search);
    const headerScanMs = await timeHeaderScan(search, t0);
    figures.push(
      {
        name: "one index read, cold (a key part)",
        value: round(readMs, 2),
        unit: "ms",
        note: "a key lookup over the whole log after 6 s idle, per part read",
      },
      {
        name: "a day: user lookup, projected",
        value: round((groupsPerDay + DEFAULT_SPANS.group - 1) * readMs + NEEDLE_CALLS * 2 * readMs, 0),
        unit: "ms",
        limit: { name: "target", value: TARGET_MS },
        note: `${groupsPerDay} groups + ${DEFAULT_SPANS.group - 1} segments read, then the records`,
      },
      {
        name: "a day: header scan of a query matching nothing, projected",
        value: round((headerScanMs / Math.max(1, stats.l0)) * segmentsPerDay, 0),
        unit: "ms",
        limit: { name: "target", value: TARGET_MS },
        note: `${segmentsPerDay} segment headers in memory (${round(headerScanMs, 1)} ms for ${stats.l0} here)`,
      },
    );
    index.close();
  } finally {
    await nc.close();
    await server.stop();
  }
  return figures;
}

/** Time per index read of a key lookup over the whole log, cold (every group and segment read once). */
async function timeIndexReads(index: AttemptIndex, search: AttemptSearch): Promise<number> {
  await idle();
  const before = index.data.reads;
  const t = performance.now();
  await search.forMessage("never-sent");
  return (performance.now() - t) / Math.max(1, index.data.reads - before);
}

/**
 * Time to go through every header's facet table for a query that matches none of them, less what
 * a query costs that every header skips by time alone (the stream info, the wait for the tail).
 */
async function timeHeaderScan(search: AttemptSearch, t0: number): Promise<number> {
  const time = async (filter: SearchFilter) => {
    await search.search(filter, { pageSize: 50 });
    const t = performance.now();
    for (let i = 0; i < 5; i++) await search.search(filter, { pageSize: 50 });
    return (performance.now() - t) / 5;
  };
  const scanned = await time({ destinationId: "d-none", sinceMs: t0 - DAY_MS });
  const skipped = await time({ destinationId: "d-none", untilMs: t0 - DAY_MS });
  return Math.max(0, scanned - skipped);
}

await printIfMain(import.meta.url, () => benchAttemptSearch(process.argv.slice(2)), true);
