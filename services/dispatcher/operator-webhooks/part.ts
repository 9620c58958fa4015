import type { DispatcherConfig } from "../config.js";
import type { CoreDeps } from "../delivery-core.js";
import { AlertMonitor } from "./monitor.js";
import { OperatorEventPublisher } from "./publisher.js";

/**
 * Operational webhooks (docs/api.md#operational-webhooks): the watcher of destinations
 * (monitor.ts) on the replica that leads, and the publisher that stores its events for the
 * delivery core, which delivers them as it delivers calls.
 */
export function startOperatorWebhooks(config: DispatcherConfig, deps: CoreDeps): AlertMonitor {
  const { conns, core, metrics, logger } = deps;
  metrics.countAutoDisabled(
    () => conns.store.destinations().filter((d) => !d.enabled && d.disabledReason).length,
  );
  const publisher = new OperatorEventPublisher({
    js: conns.js,
    partitions: config.deliveryPartitions,
    answering: (id) => core.deliveries.answering(id),
    attemptLog: core.attemptLog,
    metrics,
    logger,
  });
  const monitor = new AlertMonitor({
    nc: conns.nc,
    jsm: conns.jsm,
    store: conns.store,
    registry: conns.registry,
    publisher,
    metrics,
    logger,
    settings: config.alerts,
    replicas: config.topology.replicas,
  });
  monitor.start();
  return monitor;
}
