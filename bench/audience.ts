/**
 * Audience sync and user-source index benchmark (issue 5).
 *
 *   npx tsx bench/audience.ts            # 1 000 000 members
 *   AUDIENCE_MEMBERS=200000 npx tsx bench/audience.ts
 *   AUDIENCE_FIRST_ONLY=1 npx tsx bench/audience.ts   # the first sync alone (profiling, A/B)
 *   AUDIENCE_WINDOW=1024 AUDIENCE_LOG=info ...       # another publish window; the sync's log lines
 *
 * Starts a private nats-server (EVENTS max bytes raised so 1M identify calls fit; purged
 * between phases), then: a first sync of a 1M-member audience (1M identify calls, 1M index
 * records), a 1 % churn re-sync (0.5 % leave, 0.5 % join), an unchanged re-sync, and the cost of
 * UserSourceIndex.remember / sourcesOf. Wall time, peak RSS and peak heap per phase.
 */
import { readdirSync } from "node:fs";
import { loadavg } from "node:os";
import { pathToFileURL } from "node:url";
import type { SyncDeps } from "@hookpost/api";
import { type AudienceChunk, jetStreamPublisher, syncAudience } from "@hookpost/api";
import { serverCall } from "@hookpost/contract";
import {
  createLogger,
  DEFAULT_TOPOLOGY,
  EVENTS_STREAM,
  ensureTopology,
  MembershipStore,
  USER_SOURCES_STREAM,
  UserSourceIndex,
} from "@hookpost/core";
import { connect, type NatsConnection } from "nats";
import { NatsServer } from "../test/helpers/nats-server.js";
import { pipelined } from "./payloads.js";
import { cpuMs } from "./procs/processes.js";
import { type Figure, printTable } from "./table.js";

const CHUNK = 5_000;
const MiB = 1024 * 1024;

/** Member i: a 12-character id; consecutive i are scattered over the sort order. */
const memberId = (i: number) => `usr_${(Math.imul(i, 2654435761) >>> 0).toString(16).padStart(8, "0")}`;

async function* chunked(name: string, ids: Iterable<string>): AsyncGenerator<AudienceChunk> {
  let chunk: string[] = [];
  let first = true;
  for (const id of ids) {
    chunk.push(id);
    if (chunk.length === CHUNK) {
      yield { audienceName: first ? name : "", userIds: chunk };
      first = false;
      chunk = [];
    }
  }
  yield { audienceName: first ? name : "", userIds: chunk };
}

function* idRange(from: number, to: number, skip?: (i: number) => boolean): Generator<string> {
  for (let i = from; i < to; i++) if (!skip?.(i)) yield memberId(i);
}

/** The pid of the bench's nats-server, from the ports file it writes (`nats-server_<pid>.ports`). */
function serverPid(server: NatsServer): number | undefined {
  const file = readdirSync(server.dir).find((f) => /^nats-server_\d+\.ports$/.test(f));
  return file ? Number(file.slice("nats-server_".length, -".ports".length)) : undefined;
}

/**
 * Runs `fn`, sampling RSS and heap every 50 ms; `cpuMs`: this process's CPU meanwhile,
 * `serverCpuMs`: the nats-server's (the other half of the work; NaN off Linux).
 */
async function measure<T>(
  fn: () => Promise<T>,
  natsPid?: number,
): Promise<{ result: T; ms: number; rss: number; heap: number; cpuMs: number; serverCpuMs: number }> {
  let rss = 0;
  let heap = 0;
  const sample = () => {
    const m = process.memoryUsage();
    rss = Math.max(rss, m.rss);
    heap = Math.max(heap, m.heapUsed);
  };
  sample();
  const timer = setInterval(sample, 50);
  const started = performance.now();
  const cpu = process.cpuUsage();
  const serverCpu = cpuMs(natsPid);
  try {
    const result = await fn();
    const ms = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const serverCpuMs = cpuMs(natsPid) - serverCpu;
    sample();
    return { result, ms, rss, heap, cpuMs: (used.user + used.system) / 1000, serverCpuMs };
  } finally {
    clearInterval(timer);
  }
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

async function rememberMany(idx: UserSourceIndex, count: number, prefix: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 256 }, async () => {
      while (next < count) await idx.remember(`${prefix}${next++}`, "bench");
    }),
  );
  return Math.round(count / ((performance.now() - started) / 1000));
}

export async function benchAudience(): Promise<Figure[]> {
  const n = Number(process.env.AUDIENCE_MEMBERS ?? 1_000_000);
  const firstOnly = process.env.AUDIENCE_FIRST_ONLY === "1";
  const figures: Figure[] = [];
  const server = await NatsServer.start();
  const natsPid = serverPid(server);
  let nc: NatsConnection | undefined;
  let idx: UserSourceIndex | undefined;
  try {
    // noAsyncTraces: nats.js otherwise captures a stack trace per request (about 20 % of the
    // client CPU of a publish); services should connect with it too.
    nc = await connect({ servers: server.url, noAsyncTraces: true });
    const jsm = await nc.jetstreamManager();
    await ensureTopology(jsm, { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 8 * 1024 * MiB });
    const memberships = await MembershipStore.open(nc);
    idx = await UserSourceIndex.open(nc);
    const deps: SyncDeps = {
      nc,
      log: createLogger("bench", process.env.AUDIENCE_LOG ?? "silent"),
      memberships,
      index: idx,
      // AUDIENCE_WINDOW: identify calls awaiting their PubAck at once (default: the service's).
      ...(process.env.AUDIENCE_WINDOW ? { maxInFlight: Number(process.env.AUDIENCE_WINDOW) } : {}),
    };
    const name = "High Value Users";
    const baseline = process.memoryUsage();
    figures.push({ name: "baseline RSS before syncs", value: round(baseline.rss / MiB, 0), unit: "MiB" });

    // 1. First sync: every member joins.
    const first = await measure(() => syncAudience(deps, "bench", chunked(name, idRange(0, n))), natsPid);
    const stored = (await jsm.streams.info(EVENTS_STREAM)).state;
    figures.push(
      { name: "first sync: members", value: first.result.members, unit: "members" },
      {
        name: "first sync: wall time",
        value: round(first.ms / 1000, 1),
        unit: "s",
        limit: { name: "target", value: 30 },
        note: `load average ${round(loadavg()[0]!, 1)} after it (other work shares the cores)`,
      },
      {
        name: "first sync: sync process CPU",
        value: round((first.cpuMs * 1000) / n, 1),
        unit: "µs/member",
        note: "steadier than the wall time on a shared machine",
      },
      {
        name: "first sync: nats-server CPU",
        value: round((first.serverCpuMs * 1000) / n, 1),
        unit: "µs/member",
        note: "the server's share of the same work",
      },
      {
        name: "first sync: throughput",
        value: Math.round(first.result.joined / (first.ms / 1000)),
        unit: "members/s",
        note: "identify publish + PubAck + index record each",
      },
      {
        name: "first sync: peak RSS",
        value: round(first.rss / MiB, 0),
        unit: "MiB",
        limit: { name: "target", value: 256 },
        note: `${round((first.rss - baseline.rss) / MiB, 0)} MiB over the process's RSS before the sync`,
      },
      { name: "first sync: peak heap", value: round(first.heap / MiB, 0), unit: "MiB" },
      {
        name: "first sync: EVENTS stored",
        value: stored.messages,
        unit: "messages",
        note: `${round(stored.bytes / MiB, 0)} MiB`,
      },
    );
    await jsm.streams.purge(EVENTS_STREAM);
    if (firstOnly) return figures;

    // The limit: raw nats.js async publishes of identify calls like the sync's, same server.
    // Measured after the first sync: its garbage would otherwise count in the sync's peak RSS
    // (V8 keeps the heap it grew to for a while).
    // The publisher the sync itself uses (one pipelined publish per call, `Nats-Msg-Id` set).
    const publish = jetStreamPublisher(nc);
    const sample = 50_000;
    const identify = (i: number) =>
      serverCall(
        "identify",
        { messageId: `aud_${i.toString(36).padStart(43, "x")}`, sourceId: "bench", userId: memberId(i) },
        new Date().toISOString(),
        { context: { audience: { name, key: "high_value_users" } }, traits: { high_value_users: true } },
      );
    const rawRate = await pipelined(sample, 1_000, (i) => publish(identify(i)));
    await jsm.streams.purge(EVENTS_STREAM);
    figures.push(
      {
        name: "limit: the sync's JetStream publisher alone",
        value: Math.round(rawRate),
        unit: "msg/s",
        note: `${sample} identify calls like the sync's, 1000 in flight`,
      },
      {
        name: "floor of a first sync at that rate",
        value: round((2 * n) / rawRate, 1),
        unit: "s",
        note: `${2 * n} JetStream writes: one identify call and one index pair per member`,
      },
    );

    // 2. 1 % churn: 0.5 % leave (every 200th member), 0.5 % join (new ids).
    const joiners = Math.floor(n / 200);
    const churnIds = function* () {
      yield* idRange(0, n, (i) => i % 200 === 7);
      yield* idRange(n, n + joiners);
    };
    const churn = await measure(() => syncAudience(deps, "bench", chunked(name, churnIds())));
    figures.push(
      {
        name: "1% churn re-sync: wall time",
        value: round(churn.ms / 1000, 1),
        unit: "s",
        note: `${churn.result.joined} joined, ${churn.result.left} left, ${churn.result.members} members`,
      },
      { name: "1% churn re-sync: peak RSS", value: round(churn.rss / MiB, 0), unit: "MiB" },
      { name: "1% churn re-sync: peak heap", value: round(churn.heap / MiB, 0), unit: "MiB" },
      {
        name: "1% churn re-sync: EVENTS stored",
        value: (await jsm.streams.info(EVENTS_STREAM)).state.messages,
        unit: "messages",
      },
    );
    await jsm.streams.purge(EVENTS_STREAM);

    // 3. Unchanged re-sync (same members, another order): nothing published, nothing written.
    const sameIds = function* () {
      yield* idRange(n, n + joiners);
      yield* idRange(0, n, (i) => i % 200 === 7);
    };
    const same = await measure(() => syncAudience(deps, "bench", chunked(name, sameIds())));
    figures.push(
      {
        name: "unchanged re-sync: wall time",
        value: round(same.ms / 1000, 1),
        unit: "s",
        note: `${same.result.joined + same.result.left} changes`,
      },
      { name: "unchanged re-sync: peak RSS", value: round(same.rss / MiB, 0), unit: "MiB" },
    );

    // 4. User-source index.
    const known = 1_000_000;
    await idx.remember("known-user", "bench");
    const t0 = performance.now();
    for (let i = 0; i < known; i++) await idx.remember("known-user", "bench");
    figures.push({
      name: "index remember(): known pair",
      value: round(((performance.now() - t0) * 1e6) / known, 0),
      unit: "ns/op",
      note: "awaited; memory only, no I/O",
    });
    const fresh = 20_000;
    figures.push({
      name: "index remember(): new pairs",
      value: await rememberMany(idx, fresh, "new-user-"),
      unit: "pairs/s",
      note: "256 concurrent; one KV write each",
    });
    idx.clearMemory();
    const writesBefore = idx.stats.writes;
    figures.push({
      name: "index remember(): stored pairs, cold memory",
      value: await rememberMany(idx, fresh, "new-user-"),
      unit: "pairs/s",
      note: `as after a restart; ${idx.stats.writes - writesBefore} writes`,
    });
    const pairs = (await jsm.streams.info(USER_SOURCES_STREAM)).state.messages;
    const candidates = Array.from({ length: 20 }, (_, i) => (i === 0 ? "bench" : `source-${i}`));
    const lookups: Array<[string, () => Promise<string[]>]> = [
      ["index sourcesOf(): 20 candidate sources", () => idx!.sourcesOf(memberId(12345), candidates)],
      ["index sourcesOf(): key listing", () => idx!.sourcesOf(memberId(12345))],
    ];
    for (const [label, run] of lookups) {
      const t = performance.now();
      // A lookup that times out on a loaded machine must not cost the figures measured so far.
      const found = await run().catch((err: Error) => err);
      figures.push({
        name: label,
        value: found instanceof Error ? "failed" : round(performance.now() - t, 1),
        unit: "ms",
        note: found instanceof Error ? found.message : `${found.length} found in a bucket of ${pairs} pairs`,
      });
    }
  } finally {
    idx?.close();
    await nc?.close().catch(() => {});
    await server.stop();
  }
  return figures;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  benchAudience().then(printTable, (err) => {
    console.error(err);
    process.exit(1);
  });
}
