import { setTimeout as sleep } from "node:timers/promises";
import { DEFAULT_PUBLISH_TIMEOUT_MS } from "@hookpost/api";
import { Code, HookpostError } from "@hookpost/contract";
import {
  CONFIG_BUCKET,
  DELIVERIES_STREAM,
  EVENTS_STREAM,
  laneConsumer,
  MESSAGE_ID_HEADER,
  nextMessage,
  partitionConsumer,
  partitionCount,
  partitionFilter,
  ROUTER_CONSUMER,
} from "@hookpost/core";
import type { JetStreamManager, NatsConnection } from "nats";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { NatsCluster } from "../helpers/nats-cluster.js";
import { Receiver } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { type ServiceProcess, spawnService } from "../helpers/service-process.js";
import {
  type AdminClient,
  adminClient,
  type IngestClient,
  ingestClient,
  STACK_ADMIN_TOKEN,
} from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/** Settings every service of the cluster stack gets. */
const COMMON_ENV = { STREAM_REPLICAS: "3", LOG_LEVEL: "warn", OPS_ADDR: "off" };
/**
 * These tests measure loss and duplicates under node failures at whatever rate the machine
 * allows; on an idle machine the load passes the default per-source rate (10 000 calls/s), which
 * would answer RESOURCE_EXHAUSTED. Source quotas have their own cluster test (source-quota).
 */
/** DELIVERY_PARTITIONS of the stack's dispatchers (see where they start). */
const STACK_PARTITIONS = 2;
const INGEST_ENV = { SOURCE_MAX_RATE: "1000000", SOURCE_MAX_BURST: "2000000" };

/**
 * Hookpost on a 3-node JetStream cluster: ingest and dispatchers as real child processes given
 * all three URLs, R3 streams and bucket, a recording receiver, one source and one destination.
 */
/** How long deliveries counted as unacknowledged may hold `settled()` up once nothing is pending. */
const UNACKED_GRACE_MS = 30_000;

export class ClusterStack {
  readonly cluster: NatsCluster;
  readonly receiver: Receiver;
  readonly ingest: ServiceProcess;
  readonly dispatchers: ServiceProcess[];
  /** Each dispatcher's ops address (host:port), for its /readyz configuration revision. */
  readonly dispatcherOps: string[];
  readonly nc: NatsConnection;
  readonly admin: AdminClient;
  readonly client: IngestClient;
  readonly sourceId: string;
  readonly destinationId: string;

  private constructor(o: {
    cluster: NatsCluster;
    receiver: Receiver;
    ingest: ServiceProcess;
    dispatchers: ServiceProcess[];
    dispatcherOps: string[];
    nc: NatsConnection;
    admin: AdminClient;
    client: IngestClient;
    sourceId: string;
    destinationId: string;
  }) {
    this.cluster = o.cluster;
    this.receiver = o.receiver;
    this.ingest = o.ingest;
    this.dispatchers = o.dispatchers;
    this.dispatcherOps = o.dispatcherOps;
    this.nc = o.nc;
    this.admin = o.admin;
    this.client = o.client;
    this.sourceId = o.sourceId;
    this.destinationId = o.destinationId;
  }

  static async start(options: { dispatchers?: number } = {}): Promise<ClusterStack> {
    const cluster = await NatsCluster.start();
    const receiver = await Receiver.http();
    const processes: ServiceProcess[] = [];
    try {
      return await ClusterStack.#startServices(cluster, receiver, processes, options.dispatchers ?? 2);
    } catch (err) {
      // afterAll sees no stack: stop here what was started, or it outlives the test file.
      await stopProcesses(processes);
      await receiver.close();
      await cluster.stop();
      throw err;
    }
  }

  static async #startServices(
    cluster: NatsCluster,
    receiver: Receiver,
    processes: ServiceProcess[],
    dispatcherCount: number,
  ): Promise<ClusterStack> {
    const ingest = spawnService("services/api/main.ts", {
      ...COMMON_ENV,
      ...INGEST_ENV,
      NATS_URL: cluster.urls,
      INGEST_ADDR: "127.0.0.1:0",
      ADMIN_TOKEN: STACK_ADMIN_TOKEN,
      LOG_LEVEL: "info",
    });
    processes.push(ingest);
    const dispatchers = Array.from({ length: dispatcherCount }, () =>
      spawnService("services/dispatcher/main.ts", {
        ...COMMON_ENV,
        NATS_URL: cluster.urls,
        WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
        RETRY_BASE_DELAY: "200ms",
        PULL_EXPIRES: "2s",
        // Short, so that a delivery whose ack was lost comes back (and is counted) within the test.
        ACK_WAIT: "5s",
        // 2 × 2 partition consumers, not 2 × 8: every consumer is a raft group that a thawed or
        // restarted node must catch up, and nats-server 2.9.10 resets DELIVERIES replicas that
        // fall behind under load (docs/design/delivery-at-scale.md §7). One destination needs no more.
        DELIVERY_PARTITIONS: String(STACK_PARTITIONS),
        LOG_LEVEL: "info",
        OPS_ADDR: "127.0.0.1:0",
      }),
    );
    processes.push(...dispatchers);
    const listening = await ingest.waitFor("ingest listening", 60_000);
    const started = await Promise.all(dispatchers.map((d) => d.waitFor("dispatcher started", 60_000)));
    const dispatcherOps = started.map((r) => String(r.ops));
    const address = String(listening.address);
    const admin = adminClient(address);
    const created = await admin.createSource({ name: "cluster load" });
    const dest = await admin.createDestination({
      destination: {
        name: "hook",
        urls: [receiver.url()],
        enabled: true,
        sourceIds: [created.source!.id],
      },
    });
    const nc = await cluster.connect();
    const destinationId = dest.destination!.id;
    // Every router knows the destination before any call is sent.
    await waitForRevision(dest.revision, dispatcherOps, 30_000);
    return new ClusterStack({
      cluster,
      receiver,
      ingest,
      dispatchers,
      dispatcherOps,
      nc,
      admin,
      client: ingestClient(address, created.writeKey),
      sourceId: created.source!.id,
      destinationId,
    });
  }

  leaderOfEvents(): Promise<string> {
    return this.cluster.streamLeader(EVENTS_STREAM);
  }

  leaderOfDeliveries(): Promise<string> {
    // Deliveries are spread over the partitions: partition 0's leader is one of them.
    return this.cluster.consumerLeader(DELIVERIES_STREAM, partitionConsumer(0));
  }

  leaderOfConfig(): Promise<string> {
    return this.cluster.kvLeader(CONFIG_BUCKET);
  }

  /**
   * Resolves once every acknowledged call reached the receiver and nothing is left pending or
   * unacknowledged anywhere (so no redelivery, hence no further duplicate, can still come).
   */
  async settled(acked: readonly string[], timeoutMs = 120_000): Promise<void> {
    const jsm = await this.nc.jetstreamManager();
    try {
      await until(
        () => {
          const got = this.receiver.messageIds();
          return acked.every((id) => got.has(id));
        },
        { timeout: timeoutMs, message: `all ${acked.length} acknowledged calls delivered`, interval: 250 },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${await this.#diagnosis(jsm, acked)}`);
    }
    // A promise nothing awaited failed in a service: said, to be found (the services go on).
    const unhandled = [...this.dispatchers, this.ingest].flatMap((p) =>
      p.records.filter((r) => r.msg === "unhandled rejection"),
    );
    if (unhandled.length > 0) console.log(`unhandled rejections: ${JSON.stringify(unhandled)}`);
    // Deliveries the server stopped counting (services/dispatcher/stranded.ts) are said, not hidden.
    const rescues = this.#rescues();
    if (rescues.length > 0)
      console.log(`stranded deliveries, consumers created again: ${JSON.stringify(rescues)}`);
    const since = Date.now();
    await until(
      async () => {
        const router = await jsm.consumers.info(EVENTS_STREAM, ROUTER_CONSUMER);
        // Nothing left to hand out or awaiting an ack on the consumers that serve this
        // destination: every partition, and its lane while it has one. (Another destination
        // may be paused on purpose and keep its calls on its own lane.)
        let held = router.num_pending + router.num_ack_pending;
        let unacked = 0;
        for (const c of await jsm.consumers.list(DELIVERIES_STREAM).next()) {
          if (c.name.startsWith("part_") || c.name === laneConsumer(this.destinationId)) {
            held += c.num_pending;
            unacked += c.num_ack_pending;
          }
        }
        // Unacknowledged deliveries may only come again (duplicates, which are allowed); after a
        // node was frozen, nats-server 2.9.10 was seen to keep a few counted as unacknowledged for
        // good, so after a while they no longer hold the test up (said on the console).
        if (held === 0 && unacked > 0 && Date.now() - since > UNACKED_GRACE_MS) {
          console.log(`settled with ${unacked} deliveries still counted as unacknowledged by JetStream`);
          return true;
        }
        return held + unacked === 0;
      },
      { timeout: timeoutMs, message: "no pending or unacknowledged message", interval: 250 },
    ).catch(async (err: Error) => {
      const held = await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: ">" }).catch(() => undefined);
      throw new Error(
        `${err.message}\nDELIVERIES holds ${JSON.stringify(held?.state.subjects ?? {})}\n${await this.#diagnosis(jsm, acked)}`,
      );
    });
  }

  /** The dispatchers' warnings that a consumer was created again (services/dispatcher/stranded.ts). */
  #rescues() {
    return this.dispatchers.flatMap((p) =>
      p.records.filter((r) => String(r.msg).startsWith("stranded deliveries")),
    );
  }

  /** What a failed wait leaves to read: the calls missing, both consumers, the services' warnings. */
  async #diagnosis(jsm: JetStreamManager, acked: readonly string[]): Promise<string> {
    const got = this.receiver.messageIds();
    const missing = acked.filter((id) => !got.has(id));
    const consumer = async (stream: string, name: string) => {
      try {
        const i = await jsm.consumers.info(stream, name);
        return `${name}: pending ${i.num_pending}, ack pending ${i.num_ack_pending}, redelivered ${i.num_redelivered}, waiting pulls ${i.num_waiting}, ack floor ${i.ack_floor.stream_seq}, delivered ${i.delivered.stream_seq}, leader ${i.cluster?.leader}`;
      } catch (e) {
        return `${name}: ${(e as Error).message}`;
      }
    };
    const warnings = [this.ingest, ...this.dispatchers].flatMap((p, i) =>
      p.records
        .filter((r) => Number(r.level) >= 40)
        .slice(-15)
        .map((r) => `${i === 0 ? "ingest" : `dispatcher ${i}`}: ${JSON.stringify(r)}`),
    );
    const fates = await Promise.all(
      missing.slice(0, 3).map(async (id) => {
        try {
          const m = await this.admin.getMessage({ messageId: id });
          return `${id}: ${JSON.stringify(m, (_k, v) => (typeof v === "bigint" ? String(v) : v)).slice(0, 1500)}`;
        } catch (e) {
          return `${id}: ${(e as Error).message}`;
        }
      }),
    );
    // Where what a partition still stores sits against its consumer's view, and whether it arrived.
    const partitions: string[] = [];
    for (let p = 0; p < partitionCount(STACK_PARTITIONS); p++) {
      try {
        const c = await jsm.consumers.info(DELIVERIES_STREAM, partitionConsumer(p));
        const n = { floor: [0, 0], held: [0, 0], ahead: [0, 0] };
        let seq = 1;
        for (let i = 0; i < 20_000; i++) {
          const m = await nextMessage(jsm, DELIVERIES_STREAM, partitionFilter(p), seq);
          if (!m) break;
          const region =
            m.seq <= c.ack_floor.stream_seq ? n.floor : m.seq <= c.delivered.stream_seq ? n.held : n.ahead;
          region[0]!++;
          if (got.has(m.header?.get(MESSAGE_ID_HEADER) ?? "")) region[1]!++;
          seq = m.seq + 1;
        }
        partitions.push(
          `part_${p} stores (received already): at or below ack floor ${n.floor[0]} (${n.floor[1]}), delivered ${n.held[0]} (${n.held[1]}), not yet delivered ${n.ahead[0]} (${n.ahead[1]})`,
        );
      } catch (e) {
        partitions.push(`part_${p}: ${(e as Error).message}`);
      }
    }
    const held = await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: ">" }).catch(() => undefined);
    return [
      `${missing.length} missing, e.g. ${missing.slice(0, 5).join(", ")}`,
      `${this.#rescues().length} consumers created again by the stranded check`,
      `DELIVERIES holds ${JSON.stringify(held?.state.subjects ?? {})}`,
      ...partitions,
      ...fates,
      await consumer(EVENTS_STREAM, ROUTER_CONSUMER),
      ...(await Promise.all(
        (await jsm.consumers.list(DELIVERIES_STREAM).next()).map((c) => consumer(DELIVERIES_STREAM, c.name)),
      )),
      ...warnings,
    ].join("\n");
  }

  /** Requests at the receiver, distinct message ids, and the extra copies. */
  deliveries(): { requests: number; distinct: number; duplicates: number } {
    const requests = this.receiver.requests.length;
    const distinct = this.receiver.messageIds().size;
    return { requests, distinct, duplicates: requests - distinct };
  }

  async close(): Promise<void> {
    this.client.close();
    this.admin.close();
    await stopProcesses([this.ingest, ...this.dispatchers]);
    await this.receiver.close();
    await this.cluster.stop();
  }
}

async function stopProcesses(processes: ServiceProcess[]): Promise<void> {
  for (const p of processes) {
    if (p.proc.exitCode === null && p.proc.signalCode === null) {
      p.proc.kill("SIGKILL");
      await p.exited;
    }
  }
}

/** Ingest's PUBLISH_TIMEOUT (its default): how long it keeps trying to store a call. */
export const PUBLISH_DEADLINE_MS = DEFAULT_PUBLISH_TIMEOUT_MS;

/** One gRPC Batch call's outcome, for figures. */
interface CallRecord {
  start: number;
  ms: number;
  error?: string;
  message?: string;
}

/**
 * Steady load: `workers` loops each sending Batch calls of `batchSize` tracks (with known
 * message ids) one after the other. Records what was acknowledged and how long each call took.
 */
/** The load's default pace (calls/s over all workers). */
export const STEADY_CALLS_PER_SECOND = 1000;

/**
 * A test file's stack: started once, and replaced before a retry. A failed attempt may leave the
 * cluster itself broken (after a frozen node nats-server 2.9.10 was seen to keep DELIVERIES
 * without a leader for minutes, issue 24), and a retry on that cluster could only fail again.
 */
export function useClusterStack(options: { dispatchers?: number } = {}): () => ClusterStack {
  let stack: ClusterStack | undefined;
  beforeAll(async () => {
    stack = await ClusterStack.start(options);
  }, 120_000);
  beforeEach(async ({ task }) => {
    if ((task.result?.retryCount ?? 0) === 0) return;
    console.log(`retrying "${task.name}" on a fresh cluster`);
    const broken = stack;
    stack = undefined;
    await broken?.close();
    stack = await ClusterStack.start(options);
  }, 240_000);
  afterAll(async () => {
    await stack?.close();
  }, 60_000);
  return () => {
    if (!stack) throw new Error("the cluster stack did not start");
    return stack;
  };
}

export class Load {
  readonly acked: string[] = [];
  readonly calls: CallRecord[] = [];
  #running = true;
  readonly #done: Promise<void>;

  constructor(
    client: IngestClient,
    o: { workers?: number; batchSize?: number; tag?: string; callsPerSecond?: number } = {},
  ) {
    const batchSize = o.batchSize ?? 10;
    const workers = o.workers ?? 4;
    // Steady, not flat out: three nats-servers, ingest and two dispatchers share this machine's
    // two cores, and a flat-out load measures how far nats-server 2.9.10 can be pushed behind.
    const everyMs = (1000 * batchSize * workers) / (o.callsPerSecond ?? STEADY_CALLS_PER_SECOND);
    // Message ids are visible ASCII without spaces (the contract's rule): a tag is made to fit.
    const tag = (o.tag ?? "load").replace(/[^\x21-\x7e]/g, "-");
    const worker = async (w: number) => {
      for (let i = 0; this.#running; i++) {
        const ids = Array.from({ length: batchSize }, (_, k) => `${tag}-${w}-${i}-${k}`);
        const start = Date.now();
        try {
          await client.batch(
            {
              calls: ids.map((messageId) => ({
                call: {
                  case: "track" as const,
                  value: { userId: `u${w}`, event: "Cluster Load", messageId },
                },
              })),
            },
            { timeoutMs: 20_000 },
          );
          this.calls.push({ start, ms: Date.now() - start });
          this.acked.push(...ids);
          const left = start + everyMs - Date.now();
          if (left > 0) await sleep(left); // not a wait: the load's pace
        } catch (err) {
          const code = err instanceof HookpostError ? Code[err.code] : String(err);
          this.calls.push({
            start,
            ms: Date.now() - start,
            error: String(code),
            message: (err as Error).message,
          });
          await sleep(50); // not a wait: the load generator backs off after a failed call
        }
      }
    };
    this.#done = Promise.all(Array.from({ length: workers }, (_, w) => worker(w))).then(() => {});
  }

  /** Resolves once `n` more calls than now have been acknowledged. */
  more(n: number, timeoutMs = 60_000): Promise<true> {
    const target = this.acked.length + n;
    return until(() => this.acked.length >= target, {
      timeout: timeoutMs,
      message: `${n} more acknowledged calls`,
      interval: 50,
    });
  }

  /**
   * Failed calls that did not wait out ingest's publish deadline: ingest gave up on a call that
   * an election (however long) could still have let through. Must be none.
   */
  failedEarly(): CallRecord[] {
    return this.calls.filter((c) => c.error !== undefined && c.ms < PUBLISH_DEADLINE_MS - 1000);
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#done;
  }

  /** Failed calls by code, the longest call, and the span from the first to the last failure. */
  figures(since = 0): {
    failed: Record<string, number>;
    longestMs: number;
    unavailableMs: number;
    messages: string[];
  } {
    const calls = this.calls.filter((c) => c.start >= since);
    const failedCalls = calls.filter((c) => c.error !== undefined);
    const failed: Record<string, number> = {};
    for (const c of failedCalls) failed[c.error!] = (failed[c.error!] ?? 0) + 1;
    const longestMs = Math.max(0, ...calls.map((c) => c.ms));
    const unavailableMs =
      failedCalls.length === 0
        ? 0
        : Math.max(...failedCalls.map((c) => c.start + c.ms)) - Math.min(...failedCalls.map((c) => c.start));
    const messages = [...new Set(failedCalls.map((c) => c.message ?? ""))];
    return { failed, longestMs, unavailableMs, messages };
  }
}
