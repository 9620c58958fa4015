import { type OpsServer, startOpsServer } from "@hookpost/core";
import type { DispatcherConfig } from "./config.js";
import type { Connections } from "./connections.js";
import type { Deliveries } from "./deliveries.js";
import type { DispatcherMetrics } from "./metrics.js";

/** The ops port (OPS_ADDR): /healthz, /readyz, /metrics; none when OPS_ADDR is off. */
export async function startOps(
  config: Pick<DispatcherConfig, "opsAddr" | "opsLimits">,
  deps: {
    conns: Pick<Connections, "store" | "connection" | "registry">;
    deliveries: Deliveries;
    metrics: DispatcherMetrics;
    closing: () => boolean;
    configRevision: () => number;
  },
): Promise<OpsServer | undefined> {
  if (config.opsAddr === undefined) return undefined;
  return await startOpsServer({
    address: config.opsAddr,
    ...(config.opsLimits && { limits: config.opsLimits }),
    registry: deps.metrics.registry,
    readiness: () => readiness({ ...deps.conns, ...deps, closing: deps.closing() }),
  });
}

/** Ready: NATS is up and every delivery partition is pulled here. */
function readiness(parts: {
  store: Connections["store"];
  deliveries: Deliveries;
  connection: Connections["connection"];
  registry: Connections["registry"];
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
