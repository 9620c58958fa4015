import { setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { AttemptLog } from "../../lib/attempts/publisher.js";
import { ConfigStore } from "../../lib/config/config-store.js";
import { DeadLetters } from "../../lib/dead-letters/dead-letters.js";
import { createLogger, type Logger } from "../../lib/log/logger.js";
import { connectNats } from "../../lib/nats/connect.js";
import { ConnectionState } from "../../lib/nats/connection-state.js";
import {
  DELIVERIES_STREAM,
  destinationConsumer,
  EVENTS_STREAM,
  ensureTopology,
  ROUTER_CONSUMER,
} from "../../lib/nats/topology.js";
import { type OpsServer, splitHostPort, startOpsServer } from "../../lib/ops/ops-server.js";
import type { DispatcherConfig } from "./config.js";
import { DeliveryHandler } from "./delivery.js";
import { createWebhookAgent } from "./http-agent.js";
import { Janitor } from "./janitor.js";
import { DispatcherMetrics } from "./metrics.js";
import { Puller } from "./puller.js";
import { Router } from "./router.js";
import { WebhookSender } from "./sender.js";
import { AddressPolicy } from "./ssrf.js";
import { DestinationSupervisor } from "./supervisor.js";

export interface RunningDispatcher {
  /** Graceful: stop pulling, let in-flight deliveries finish (or hand them back), drain NATS. */
  close(): Promise<void>;
  metrics: DispatcherMetrics;
  /** Port of the ops server, when one was started. */
  opsPort?: number;
}

const JANITOR_INTERVAL_MS = 60_000;

export async function startDispatcher(
  config: DispatcherConfig,
  options: { logger?: Logger } = {},
): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger("dispatcher", config.logLevel);
  const nc = await connectNats(config.natsUrl, "hookpost-dispatcher", logger);
  const jsm = await nc.jetstreamManager();
  // JetStream can lag the server's start (or a cluster may be electing): keep trying.
  for (let i = 1; ; i++) {
    try {
      await ensureTopology(jsm, config.topology);
      break;
    } catch (err) {
      logger.warn({ attempt: i, err: (err as Error).message }, "JetStream not ready; retrying");
      await sleep(Math.min(5000, 250 * i));
    }
  }
  const connection = new ConnectionState(nc);
  connection.onChange((up) =>
    up
      ? logger.info("NATS connection is back")
      : logger.warn("NATS connection lost: not ready until it is back"),
  );
  const js = nc.jetstream();
  const store = await ConfigStore.open(nc, { replicas: config.topology.replicas });
  const deadLetters = await DeadLetters.open(nc);

  const metrics = new DispatcherMetrics(async () => {
    const out = new Map<string, number>();
    // While NATS is away the lookups could only time out: report nothing rather than stall scrapes.
    if (!connection.connected) return out;
    await Promise.all(
      store.destinations().map(async (dest) => {
        const info = await jsm.consumers
          .info(DELIVERIES_STREAM, destinationConsumer(dest.id))
          .catch(() => undefined);
        if (info) out.set(dest.id, info.num_pending + info.num_ack_pending);
      }),
    );
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
  });
  store.on("change", (c) => {
    if (c.kind === "destination" && !c.record) metrics.forgetDestination(c.id);
  });
  const shutdown = new AbortController();
  // Every in-flight request listens to it: that is bounded by the concurrency, not a leak.
  setMaxListeners(0, shutdown.signal);
  const handler = new DeliveryHandler({
    store,
    sender,
    deadLetters,
    policy: {
      baseDelayMs: config.retryBaseDelayMs,
      maxDelayMs: config.topology.retryMaxDelayMs,
      windowMs: config.topology.retryWindowMs,
    },
    ackWaitMs: config.ackWaitMs,
    metrics,
    logger,
    attemptLog,
    shutdown: shutdown.signal,
  });
  const supervisor = new DestinationSupervisor({
    js,
    jsm,
    store,
    handler,
    consumer: { ackWaitMs: config.ackWaitMs, maxAckPending: config.maxAckPending },
    concurrency: config.deliveryConcurrency,
    pullExpiresMs: config.pullExpiresMs,
    logger,
  });
  await supervisor.start();

  const router = new Router({ js, store, metrics, logger, attemptLog });
  const routerPuller = new Puller({
    js,
    stream: EVENTS_STREAM,
    consumer: ROUTER_CONSUMER,
    concurrency: config.routerConcurrency,
    expiresMs: config.pullExpiresMs,
    handle: (msg) => router.handle(msg),
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
  });
  janitor.start(Math.min(5000, janitorIntervalMs));

  let closing: Promise<void> | undefined;
  const ops: OpsServer | undefined =
    config.opsAddr === undefined
      ? undefined
      : await startOpsServer({
          address: config.opsAddr,
          registry: metrics.registry,
          // Ready: NATS is up and every enabled destination has its consumer pulled here.
          readiness: () => {
            const enabled = store.destinations().filter((d) => d.enabled).length;
            const pulling = supervisor.active().length;
            const ready = !closing && connection.connected && pulling >= enabled;
            return { ready, detail: { nats: connection.connected, enabled, pulling, closing: !!closing } };
          },
        });

  logger.info(
    {
      destinations: store.destinations().length,
      ...(ops ? { ops: ops.address } : {}),
      concurrency: config.deliveryConcurrency,
      timeoutMs: config.webhookTimeoutMs,
      retryWindowMs: config.topology.retryWindowMs,
    },
    "dispatcher started",
  );

  const close = async () => {
    logger.info("dispatcher stopping");
    routerPuller.pause();
    supervisor.stopPulling();
    await janitor.stop();
    const grace = config.shutdownGraceMs;
    const settled = await Promise.all([routerPuller.settle(grace), supervisor.settle(grace)]);
    if (!settled.every(Boolean)) {
      logger.warn("grace period over: handing in-flight deliveries back");
      shutdown.abort();
    }
    // Open pulls end within PULL_EXPIRES; messages they still bring are handed back.
    await Promise.all([routerPuller.drain(), supervisor.drain()]);
    store.close();
    await attemptLog.flush();
    await ops?.close();
    await nc.drain().catch(() => {});
    await agent.close();
    logger.info("dispatcher stopped");
  };
  return {
    close: () => {
      closing ??= close();
      return closing;
    },
    metrics,
    ...(ops ? { opsPort: splitHostPort(ops.address).port } : {}),
  };
}
