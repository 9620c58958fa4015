import { setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import {
  AttemptLog,
  ConfigStore,
  ConnectionState,
  connectNats,
  createLogger,
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  DeadLetters,
  destinationOfSubject,
  EVENTS_STREAM,
  ensureTopology,
  LANE_SUBJECT_PREFIX,
  type Logger,
  type OpsServer,
  PipelinedPublisher,
  ROUTER_CONSUMER,
  registerConfigRevision,
  splitHostPort,
  startOpsServer,
  type TopologySettings,
} from "@hookpost/core";
import type { JetStreamManager, NatsConnection } from "nats";
import { AutoDisabler } from "./auto-disable.js";
import { Breakers } from "./breaker.js";
import { Capacity } from "./capacity.js";
import type { DispatcherConfig } from "./config.js";
import { Deliveries } from "./deliveries.js";
import { type AttemptObserver, DeliveryHandler } from "./delivery.js";
import { createWebhookAgent } from "./http-agent.js";
import { Janitor } from "./janitor.js";
import { migrateLegacyConsumers } from "./legacy.js";
import { DispatcherMetrics } from "./metrics.js";
import { OrderedDelivery } from "./ordered/ordered-delivery.js";
import { Parking } from "./parking.js";
import { Puller } from "./puller.js";
import { ReplicaRegistry } from "./replica-registry.js";
import { Router } from "./router.js";
import { WebhookSender } from "./sender.js";
import { AddressPolicy } from "./ssrf.js";
import { StrandedRescue } from "./stranded.js";

export interface RunningDispatcher {
  /** Graceful: stop pulling, let in-flight deliveries finish (or hand them back), drain NATS. */
  close(): Promise<void>;
  metrics: DispatcherMetrics;
  /** The configuration revision this replica has applied (also on /readyz and as a metric). */
  configRevision(): number;
  /** Port of the ops server, when one was started. */
  opsPort?: number;
}

const JANITOR_INTERVAL_MS = 60_000;
/** How long a fan-out publish waits for its PubAck (nats.js's default). */
const PUBLISH_TIMEOUT_MS = 5_000;
/** How long one ack confirmation waits before the ack is sent again (confirmed-ack.ts). */
const ACK_CONFIRM_TIMEOUT_MS = 2_000;

export async function startDispatcher(
  config: DispatcherConfig,
  options: { logger?: Logger } = {},
): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger("dispatcher", config.logLevel);
  const nc = await connectNats(config.natsUrl, "hookpost-dispatcher", logger);
  const jsm = await nc.jetstreamManager();
  const { store, deadLetters, registry } = await openStores(nc, jsm, config.topology, logger);
  const connection = new ConnectionState(nc);
  connection.onChange((up) =>
    up
      ? logger.info("NATS connection is back")
      : logger.warn("NATS connection lost: not ready until it is back"),
  );
  const js = nc.jetstream();
  // Fan-out publishes and attempt-log records: one inbox, writes batched per turn.
  const pipe = new PipelinedPublisher(nc, PUBLISH_TIMEOUT_MS);
  // Acks, naks and progress notes have their own, with a shorter wait: an ack lost to a consumer leader's election is
  // resent after 2 s, well inside ack-wait, so the message is not delivered a second time.
  const acks = new PipelinedPublisher(nc, ACK_CONFIRM_TIMEOUT_MS);

  const metrics = new DispatcherMetrics(async () => {
    const out = new Map<string, number>();
    // While NATS is away the lookups could only time out: report nothing rather than stall scrapes.
    if (!connection.connected) return out;
    // Two stream infos, whatever the number of destinations: subjects holding messages, with counts.
    for (const filter of [`${DELIVERY_SUBJECT_PREFIX}>`, `${LANE_SUBJECT_PREFIX}>`]) {
      const info = await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
      for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
        const id = destinationOfSubject(subject);
        if (id !== undefined && store.destination(id)) out.set(id, (out.get(id) ?? 0) + n);
      }
    }
    // Every destination has a series, 0 when nothing waits (only subjects holding messages are listed).
    for (const dest of store.destinations()) if (!out.has(dest.id)) out.set(dest.id, 0);
    return out;
  });
  const agent = createWebhookAgent({
    policy: new AddressPolicy(config.allowedCidrs),
    connectTimeoutMs: config.webhookTimeoutMs,
    ...(config.caFile === undefined ? {} : { caFile: config.caFile }),
  });
  const sender = new WebhookSender({
    agent,
    timeoutMs: config.webhookTimeoutMs,
    logger,
  });
  const attemptLog = new AttemptLog(nc, {
    enabled: config.attemptLog,
    bodies: config.attemptLogBodies,
    connected: () => connection.connected,
    logger,
    onDrop: (why) => metrics.attemptLogDropped.inc({ why }),
    writer: pipe,
    health: { replica: registry.id },
  });
  store.on("change", (c) => {
    if (c.kind === "destination" && !c.record) metrics.forgetDestination(c.id);
  });
  const shutdown = new AbortController();
  // Every in-flight request listens to it: that is bounded by the concurrency, not a leak.
  setMaxListeners(0, shutdown.signal);
  // One per replica: its failure clock is shared by the unordered core and the ordered worker.
  const autoDisable = new AutoDisabler({ store, afterMs: config.autoDisableAfterMs, metrics, logger });
  const retryPolicy = {
    baseDelayMs: config.retryBaseDelayMs,
    maxDelayMs: config.topology.retryMaxDelayMs,
    windowMs: config.topology.retryWindowMs,
  };
  const capacity = new Capacity(config.maxConnections);
  const breakers = new Breakers({
    threshold: config.breakerFailures,
    maxCoolDownMs: config.topology.retryMaxDelayMs,
  });
  const observer: AttemptObserver = {
    answered: (id) => {
      capacity.answered(id);
      breakers.succeeded(id);
    },
    failed: (id, stalled, reason) => {
      if (stalled) capacity.stall(id);
      else capacity.answered(id);
      breakers.failed(id, reason);
    },
    released: (id) => breakers.released(id),
  };
  const parking = new Parking(pipe);
  const handler = new DeliveryHandler({
    store,
    sender,
    deadLetters,
    policy: retryPolicy,
    ackWaitMs: config.ackWaitMs,
    metrics,
    logger,
    attemptLog,
    shutdown: shutdown.signal,
    autoDisable,
    parking,
    health: observer,
  });
  const consumer = { ackWaitMs: config.ackWaitMs, maxAckPending: config.maxAckPending };
  const deliveries = new Deliveries({
    js,
    jsm,
    acks,
    connection,
    store,
    handler,
    logger,
    registry,
    shutdown: shutdown.signal,
    consumer,
    pullExpiresMs: config.pullExpiresMs,
    partitions: config.deliveryPartitions,
    concurrency: config.deliveryConcurrency,
    capacity,
    breakers,
    attemptLog,
    lanes: {
      sweepMs: config.laneSweepMs,
      idleMs: config.laneIdleMs,
      onStrandedRecreated: () => metrics.stranded.inc({ consumer: "lane" }),
    },
    retryWindowMs: config.topology.retryWindowMs,
  });
  parking.onParked = (id) => void deliveries.lanes.ensure(id);
  await migrateLegacyConsumers({ jsm, parking, logger });
  await deliveries.start();
  // Configuration is read at every attempt, so a change is in effect once the store has it,
  // except a removal, which counts once its deliveries are purged.
  let appliedRevision = 0;
  const configRevision = () => {
    if (deliveries.idle) appliedRevision = store.revision;
    return appliedRevision;
  };
  registerConfigRevision(metrics.registry, configRevision);

  const router = new Router({
    publisher: pipe,
    store,
    metrics,
    logger,
    attemptLog,
    orderedPartitions: config.orderedPartitions,
    deliveryPartitions: config.deliveryPartitions,
  });
  // Ordered delivery (PER_USER destinations, issue 24): a worker of its own beside the unordered core.
  const ordered = new OrderedDelivery({
    nc,
    jsm,
    store,
    registry,
    connection,
    partitions: config.orderedPartitions,
    concurrency: config.deliveryConcurrency,
    sender,
    deadLetters,
    attemptLog,
    metrics,
    logger,
    policy: retryPolicy,
    autoDisable,
  });
  ordered.start();

  const routerPuller = new Puller({
    js,
    stream: EVENTS_STREAM,
    consumer: ROUTER_CONSUMER,
    concurrency: config.routerConcurrency,
    expiresMs: config.pullExpiresMs,
    handle: (msg) => router.handle(msg),
    acks,
    connection,
    logger,
  });
  routerPuller.resume();

  // Often enough that a disabled destination's expired backlog is recorded well before max-age.
  const janitorIntervalMs = Math.min(
    JANITOR_INTERVAL_MS,
    Math.max(500, Math.floor(config.topology.retryWindowMs / 4)),
  );
  const janitor = new Janitor({
    jsm,
    store,
    deadLetters,
    attemptLog,
    retryWindowMs: config.topology.retryWindowMs,
    intervalMs: janitorIntervalMs,
    logger,
    parking,
  });
  janitor.start(Math.min(5000, janitorIntervalMs));
  const stranded = new StrandedRescue({
    jsm,
    logger,
    partitions: config.deliveryPartitions,
    consumer,
    intervalMs: config.strandedCheckMs,
    onRecreated: () => metrics.stranded.inc({ consumer: "partition" }),
  });
  stranded.start();

  let closing: Promise<void> | undefined;
  const ops: OpsServer | undefined =
    config.opsAddr === undefined
      ? undefined
      : await startOpsServer({
          address: config.opsAddr,
          ...(config.opsLimits && { limits: config.opsLimits }),
          registry: metrics.registry,
          readiness: () =>
            readiness({ store, deliveries, connection, registry, closing: !!closing, configRevision }),
        });

  logger.info(
    {
      destinations: store.destinations().length,
      ...(ops ? { ops: ops.address } : {}),
      concurrency: config.deliveryConcurrency,
      partitions: config.deliveryPartitions,
      maxConnections: config.maxConnections,
      timeoutMs: config.webhookTimeoutMs,
      retryWindowMs: config.topology.retryWindowMs,
    },
    "dispatcher started",
  );

  const close = async () => {
    logger.info("dispatcher stopping");
    routerPuller.pause();
    deliveries.stopPulling();
    await janitor.stop();
    await stranded.stop();
    await ordered.close(config.shutdownGraceMs);
    const grace = config.shutdownGraceMs;
    const settled = await Promise.all([routerPuller.settle(grace), deliveries.settle(grace)]);
    if (!settled.every(Boolean)) {
      logger.warn("grace period over: handing in-flight deliveries back");
      shutdown.abort();
    }
    // Open pulls end within PULL_EXPIRES; messages they still bring are handed back.
    await Promise.all([routerPuller.drain(), deliveries.drain()]);
    await registry.close();
    store.close();
    // Says this replica leaves: its breakers stop showing in health at once.
    await attemptLog.close();
    await ops?.close();
    // Writes queued in this turn (the last acks and naks) go out before the drain.
    await new Promise((resolve) => setImmediate(resolve));
    await nc.drain().catch(() => {});
    pipe.close();
    acks.close();
    await agent.close();
    logger.info("dispatcher stopped");
  };
  return {
    close: () => {
      closing ??= close();
      return closing;
    },
    metrics,
    configRevision,
    ...(ops ? { opsPort: splitHostPort(ops.address).port } : {}),
  };
}

/** The stores a replica needs; JetStream can lag the server's start (or a cluster may be electing): keeps trying. */
async function openStores(
  nc: NatsConnection,
  jsm: JetStreamManager,
  topology: TopologySettings,
  logger: Logger,
): Promise<{ store: ConfigStore; deadLetters: DeadLetters; registry: ReplicaRegistry }> {
  let registry: ReplicaRegistry | undefined;
  for (let i = 1; ; i++) {
    try {
      await ensureTopology(jsm, topology);
      const deadLetters = await DeadLetters.open(nc);
      // Opened once: it heartbeats from then on.
      registry ??= await ReplicaRegistry.open(nc, { replicas: topology.replicas, logger });
      // Last: once open it watches, so a failure after it would leave a watcher behind.
      const store = await ConfigStore.open(nc, { replicas: topology.replicas });
      return { store, deadLetters, registry };
    } catch (err) {
      logger.warn({ attempt: i, err: (err as Error).message }, "JetStream not ready; retrying");
      await sleep(Math.min(5000, 250 * i));
    }
  }
}

/** Ready: NATS is up and every delivery partition is pulled here. */
function readiness(parts: {
  store: ConfigStore;
  deliveries: Deliveries;
  connection: ConnectionState;
  registry: ReplicaRegistry;
  closing: boolean;
  configRevision: () => number;
}) {
  const { store, deliveries, connection, registry, closing } = parts;
  const pulling = deliveries.pulling;
  const ready = !closing && connection.connected && pulling;
  const detail = {
    nats: connection.connected,
    pulling,
    // Destinations this replica knows as enabled (configuration applied).
    enabled: store.destinations().filter((d) => d.enabled).length,
    lanes: deliveries.lanes.size,
    closing,
    replicas: registry.live.length,
  };
  return { ready, detail: { ...detail, configRevision: parts.configRevision() } };
}
