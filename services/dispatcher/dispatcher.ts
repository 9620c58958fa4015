import {
  createLogger,
  type Logger,
  PLAIN_SECRETS_WARNING,
  registerConfigRevision,
  splitHostPort,
} from "@hookpost/core";
import type { DispatcherConfig } from "./config.js";
import { backlogOf, closeStores, drainConnections, openConnections } from "./connections.js";
import { startDeliveryCore, startOrdered } from "./delivery-core.js";
import { startHousekeeping } from "./housekeeping.js";
import { DispatcherMetrics } from "./metrics.js";
import { startOperatorWebhooks } from "./operator-webhooks/part.js";
import { startOps } from "./ops-part.js";
import { startRouting } from "./routing.js";

export interface RunningDispatcher {
  /** Graceful: stop pulling, let in-flight deliveries finish (or hand them back), drain NATS. */
  close(): Promise<void>;
  metrics: DispatcherMetrics;
  /** The configuration revision this replica has applied (also on /readyz and as a metric). */
  configRevision(): number;
  /** Port of the ops server, when one was started. */
  opsPort?: number;
  /** This replica watches destinations for the operational webhooks now (one replica does). */
  watchingAlerts(): boolean;
}

/**
 * The dispatcher's composition root: builds its parts from the configuration, in order, and hands
 * each what it needs (none reads the environment); close() stops them in the opposite order.
 */
export async function startDispatcher(
  config: DispatcherConfig,
  options: {
    logger?: Logger;
    /**
     * The replica cannot go on: a configuration record written since the start does not decrypt
     * with SECRETS_KEYS (main.ts logs the error's one line and exits). Default: logged as an error.
     */
    onFatal?: (err: Error) => void;
  } = {},
): Promise<RunningDispatcher> {
  const logger = options.logger ?? createLogger("dispatcher", config.logLevel);
  const conns = await openConnections(config, logger);
  const { store } = conns;
  if (config.keyring === undefined) logger.warn(PLAIN_SECRETS_WARNING);
  store.on("unreadable", options.onFatal ?? ((err) => logger.error(err.message)));
  const metrics = new DispatcherMetrics(backlogOf(conns));
  const core = await startDeliveryCore(config, { conns, metrics, logger });
  const { deliveries } = core;
  // Configuration is read at every attempt, so a change is in effect once the store has it,
  // except a removal, which counts once its deliveries are purged.
  let appliedRevision = 0;
  const configRevision = () => {
    if (deliveries.idle) appliedRevision = store.revision;
    return appliedRevision;
  };
  registerConfigRevision(metrics.registry, configRevision);
  const parts = { conns, core, metrics, logger };
  const ordered = startOrdered(config, parts);
  const router = startRouting(config, parts);
  const housekeeping = startHousekeeping(config, parts);
  const alerts = startOperatorWebhooks(config, parts);

  let closing: Promise<void> | undefined;
  const ops = await startOps(config, {
    conns,
    deliveries,
    metrics,
    closing: () => !!closing,
    configRevision,
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
    router.pause();
    deliveries.stopPulling();
    await housekeeping.stop();
    await alerts.close();
    await ordered.close(config.shutdownGraceMs);
    const grace = config.shutdownGraceMs;
    const settled = await Promise.all([router.settle(grace), deliveries.settle(grace)]);
    if (!settled.every(Boolean)) {
      logger.warn("grace period over: handing in-flight deliveries back");
      core.abort();
    }
    // Open pulls end within PULL_EXPIRES; messages they still bring are handed back.
    await Promise.all([router.drain(), deliveries.drain()]);
    await closeStores(conns);
    // Says this replica leaves: its breakers stop showing in health at once.
    await core.attemptLog.close();
    await ops?.close();
    await drainConnections(conns);
    await core.agent.close();
    logger.info("dispatcher stopped");
  };
  return {
    close: () => {
      closing ??= close();
      return closing;
    },
    metrics,
    configRevision,
    watchingAlerts: () => alerts.watching,
    ...(ops ? { opsPort: splitHostPort(ops.address).port } : {}),
  };
}
