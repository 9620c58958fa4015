import { setMaxListeners } from "node:events";
import { AttemptLog, type Logger } from "@hookpost/core";
import type { Agent } from "undici";
import { AutoDisabler } from "./auto-disable.js";
import { Breakers } from "./breaker.js";
import { Capacity } from "./capacity.js";
import type { DispatcherConfig } from "./config.js";
import type { Connections } from "./connections.js";
import type { ConsumerSettings } from "./consumers.js";
import { Deliveries } from "./deliveries.js";
import { type AttemptObserver, DeliveryHandler } from "./delivery.js";
import { createWebhookAgent } from "./http-agent.js";
import { migrateLegacyConsumers } from "./legacy.js";
import { LoopLag } from "./loop-lag.js";
import type { DispatcherMetrics } from "./metrics.js";
import { OrderedDelivery } from "./ordered/ordered-delivery.js";
import { Parking } from "./parking.js";
import type { RetryPolicy } from "./retry.js";
import { WebhookSender } from "./sender.js";
import { AddressPolicy } from "./ssrf.js";

/** The unordered delivery core and what the other parts share with it (sender, attempt log, retry policy). */
export interface DeliveryCore {
  readonly agent: Agent;
  readonly sender: WebhookSender;
  readonly attemptLog: AttemptLog;
  readonly autoDisable: AutoDisabler;
  readonly retryPolicy: RetryPolicy;
  readonly consumer: ConsumerSettings;
  readonly parking: Parking;
  readonly deliveries: Deliveries;
  /** Aborts the requests in flight (the grace period is over): their deliveries are handed back. */
  abort(): void;
}

/** What the parts built on the delivery core receive. */
export interface CoreDeps {
  conns: Connections;
  core: DeliveryCore;
  metrics: DispatcherMetrics;
  logger: Logger;
}

/**
 * Builds the webhook sender, the attempt log and the delivery core (partitions, lanes, parking),
 * moves consumers an older version left behind, and starts pulling.
 */
export async function startDeliveryCore(
  config: DispatcherConfig,
  deps: { conns: Connections; metrics: DispatcherMetrics; logger: Logger },
): Promise<DeliveryCore> {
  const { conns, metrics, logger } = deps;
  const { nc, jsm, js, acks, ackReplay, pipe, connection, store, deadLetters, registry } = conns;
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
  const autoDisable = new AutoDisabler({
    store,
    afterMs: config.autoDisableAfterMs,
    metrics,
    logger,
    peers: { nc, registry },
  });
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
    answered: (id, ms) => {
      capacity.answered(id, ms);
      breakers.succeeded(id);
    },
    failed: (id, stalled, reason, ms) => {
      if (stalled) capacity.stall(id);
      else capacity.answered(id, ms);
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
    ackReplay,
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
    // Half the router's concurrency at most: a destination turning slow cannot stall routing.
    ...(config.directDelivery && {
      direct: {
        max: Math.max(1, Math.floor(config.routerConcurrency / 2)),
        maxLatencyMs: DIRECT_MAX_LATENCY_MS,
        lag: new LoopLag(),
      },
    }),
  });
  parking.onParked = (id) => void deliveries.lanes.ensure(id);
  await migrateLegacyConsumers({ jsm, parking, logger });
  await deliveries.start();
  return {
    agent,
    sender,
    attemptLog,
    autoDisable,
    retryPolicy,
    consumer,
    parking,
    deliveries,
    abort: () => shutdown.abort(),
  };
}

/** Destinations answering within this on average get the router's own first attempt (design §6). */
const DIRECT_MAX_LATENCY_MS = 250;

/** Ordered delivery (PER_USER destinations, issue 24): a worker of its own beside the unordered core. */
export function startOrdered(config: DispatcherConfig, deps: CoreDeps): OrderedDelivery {
  const { conns, core, metrics, logger } = deps;
  const ordered = new OrderedDelivery({
    nc: conns.nc,
    jsm: conns.jsm,
    store: conns.store,
    registry: conns.registry,
    connection: conns.connection,
    partitions: config.orderedPartitions,
    concurrency: config.deliveryConcurrency,
    sender: core.sender,
    deadLetters: conns.deadLetters,
    attemptLog: core.attemptLog,
    metrics,
    logger,
    policy: core.retryPolicy,
    autoDisable: core.autoDisable,
  });
  ordered.start();
  return ordered;
}
