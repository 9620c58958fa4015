import { randomBytes } from "node:crypto";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import {
  connectNats,
  createLogger,
  DEFAULT_OPS_LIMITS,
  drainNats,
  ErasureWorker,
  type GrpcListenerStats,
  type Logger,
  type OpsServer,
  PLAIN_SECRETS_WARNING,
  type Readiness,
  registerConfigRevision,
  startOpsServer,
} from "@hookpost/core";
import { startAdmin } from "./admin/admin-part.js";
import { AdminAuth } from "./auth.js";
import { startCallsPath } from "./calls/calls-path.js";
import { EventPublisher } from "./calls/publish.js";
import { defaultSourceQuota } from "./calls/quota.js";
import { DEFAULT_ERASURE, type IngestConfig } from "./config.js";
import { createConsoleHandler } from "./console/console-handler.js";
import { grpcServer } from "./grpc/grpc-server.js";
import { startHttp } from "./http/http-part.js";
import type { Mount } from "./http/server.js";
import { IngestMetrics } from "./metrics.js";
import { openStores, recreateTopology } from "./stores.js";
import { startSync } from "./sync/sync-part.js";

export interface IngestOptions {
  logger?: Logger;
  /** Extra handlers on the HTTP listener (HTTP_ADDR), tried after the Segment API, before the 404. */
  httpMounts?: readonly Mount[];
  /**
   * The service cannot go on: a configuration record written since the start does not decrypt
   * with SECRETS_KEYS (main.ts logs the error's one line and exits). Default: logged as an error.
   */
  onFatal?: (err: Error) => void;
}

export interface IngestHandle {
  /** `host:port` the gRPC server is bound to (the real port when INGEST_ADDR asked for 0). */
  readonly address: string;
  /** The admin token in force: ADMIN_TOKEN, or the one generated at start. Never logged. */
  readonly adminToken: string;
  /** True when ADMIN_TOKEN was unset and the token was generated. */
  readonly adminTokenGenerated: boolean;
  /** `host:port` of /healthz, /readyz, /metrics, when OPS_ADDR is set. */
  readonly opsAddress: string | undefined;
  /** `host:port` of the HTTP listener (Segment-compatible API, web console, AdminService over Connect), when HTTP_ADDR is set. */
  readonly httpAddress: string | undefined;
  readonly metrics: IngestMetrics;
  /** Live counters of the gRPC port's TCP connections (tests, diagnostics). */
  readonly grpcConnections: GrpcListenerStats;
  /** Stops taking calls, lets in-flight calls finish (bounded), then drains NATS. */
  close(): Promise<void>;
}

const SHUTDOWN_GRACE_MS = 10_000;
const DRAIN_TIMEOUT_MS = 5_000;

/**
 * The API service's composition root: builds its parts from the configuration, in order, and
 * hands each what it needs (none reads the environment). Waits for NATS, creates the streams and
 * buckets (idempotently), loads the configuration, then serves IngestService, AdminService and
 * grpc.health.v1 over gRPC, and, when asked, the HTTP listener and the ops port.
 */
export async function startIngest(config: IngestConfig, options: IngestOptions = {}): Promise<IngestHandle> {
  const log = options.logger ?? createLogger("ingest", config.logLevel);
  const { adminToken, adminTokenGenerated } = adminTokenOf(config, log);
  const adminAuth = new AdminAuth(adminToken);
  const metrics = new IngestMetrics({ defaultMetrics: config.opsAddress !== undefined });
  const grpc = await grpcServer(config, { metrics, log });

  // NATS URLs may carry credentials (nats://user:pass@host): never log those.
  log.info(
    { nats: config.natsUrl.replace(/\/\/[^@/]*@/g, "//***@") },
    "connecting to NATS (waits until it is up)",
  );
  const nc = await connectNats(config.natsUrl, "hookpost-ingest", log);
  // Created first so that it tracks the connection from the start.
  const publisher = new EventPublisher(nc, log, {
    timeoutMs: config.publishTimeoutMs,
    onPublished: (type, outcome, ms) => metrics.published(type, outcome, ms),
  });
  // What has started, stopped at once (newest first) when a later part fails to start.
  const started: (() => unknown)[] = [() => nc.close().catch(() => {})];
  try {
    // The per-source quotas, defaults resolved once: the calls path, the user index and the
    // audit share each apply part of them.
    const quota = config.quota ?? defaultSourceQuota(config.topology);
    const stores = await openStores(nc, { ...config, maxUsersPerSource: quota.maxUsers }, { metrics, log });
    started.push(() => stores.close());
    if (config.keyring === undefined) log.warn(PLAIN_SECRETS_WARNING);
    stores.config.on("unreadable", options.onFatal ?? ((err) => log.error(err.message)));
    registerConfigRevision(metrics.registry, () => stores.config.revision);

    metrics.natsConnected(true);
    publisher.onStatus((up) => {
      metrics.natsConnected(up);
      grpc.setHealth(up ? "SERVING" : "NOT_SERVING");
      if (up) {
        log.info("NATS connection is back: taking calls again");
        void recreateTopology(nc, config.topology, log);
      } else {
        log.warn("NATS connection lost: answering UNAVAILABLE until it is back");
      }
    });

    // Erasure of deleted users' calls: every replica works through the pending requests.
    const erasure = new ErasureWorker(nc, stores.deletions, {
      ...(config.erasure ?? DEFAULT_ERASURE),
      memberships: stores.memberships,
      log,
    });
    erasure.start();
    started.push(() => erasure.close());

    const calls = await startCallsPath(
      { ...config, quota },
      {
        nc,
        stores,
        publisher,
        adminAuth,
        metrics,
        log,
        onDeletionRequested: () => erasure.nudge(),
      },
    );
    started.push(() => calls.close());
    const sync = await startSync(config.sync, { nc, stores, publisher, quota: calls.quota, metrics, log });
    grpc.add(IngestService, { ...calls.service, ...sync });

    const admin = await startAdmin({
      nc,
      stores,
      adminAuth,
      natsConnected: () => publisher.connected,
      log,
      onAuditOutcomeLost: () => metrics.auditOutcomeLost(),
      retryBounds: { windowMs: config.topology.retryWindowMs, maxDelayMs: config.topology.retryMaxDelayMs },
      registry: metrics.registry,
      consoleUrl: config.consoleUrl,
      auditShareBytes: quota.maxAuditBytes,
    });
    started.push(() => admin.close());
    grpc.add(AdminService, admin.service);

    const { address, stats } = await grpc.listen();
    started.push(() => grpc.abort());

    const consoleHandler = createConsoleHandler({
      admin: admin.service,
      serveOptions: grpc.serveOptions,
      frameAncestors: config.frameAncestors ?? [],
    });
    const http =
      config.httpAddress === undefined
        ? undefined
        : await startHttp(
            { ...config, httpAddress: config.httpAddress },
            { store: stores.config, intake: calls.intake, maxBatchCalls: calls.maxBatchCalls, metrics, log },
            [consoleHandler, ...(options.httpMounts ?? [])],
          );
    started.push(() => http?.close(0));

    let closing = false;
    const ops = await startOps(config, metrics, () => ({
      ready: publisher.connected && !closing,
      detail: { nats: publisher.connected, grpc: address, closing, configRevision: stores.config.revision },
    }));

    let closed: Promise<void> | undefined;
    return {
      address,
      httpAddress: http?.address,
      adminToken,
      adminTokenGenerated,
      opsAddress: ops?.address,
      metrics,
      grpcConnections: stats,
      close: () => {
        closed ??= (async () => {
          // Not ready, then no new calls; in-flight ones finish; the ops port answers until then.
          closing = true;
          grpc.setHealth("NOT_SERVING");
          await Promise.all([grpc.close(SHUTDOWN_GRACE_MS), http?.close(SHUTDOWN_GRACE_MS)]);
          await ops?.close();
          await stores.close();
          admin.close();
          calls.close();
          erasure.close();
          await drainNats(nc, DRAIN_TIMEOUT_MS);
          log.info("ingest stopped");
        })();
        return closed;
      },
    };
  } catch (err) {
    for (const stop of started.reverse()) await stop();
    throw err;
  }
}

/** The ops port (OPS_ADDR): /healthz, /readyz, /metrics; none when OPS_ADDR is off. */
function startOps(
  config: Pick<IngestConfig, "opsAddress" | "opsLimits">,
  metrics: IngestMetrics,
  readiness: () => Readiness,
): Promise<OpsServer> | undefined {
  if (config.opsAddress === undefined) return undefined;
  return startOpsServer({
    address: config.opsAddress,
    limits: config.opsLimits ?? DEFAULT_OPS_LIMITS,
    registry: metrics.registry,
    readiness,
  });
}

/** ADMIN_TOKEN, or a random one for this run when it is unset (said in the log, never shown). */
function adminTokenOf(
  config: IngestConfig,
  log: Logger,
): { adminToken: string; adminTokenGenerated: boolean } {
  if (config.adminToken !== undefined) return { adminToken: config.adminToken, adminTokenGenerated: false };
  log.warn("ADMIN_TOKEN is not set: generated a random admin token for this run (it is not logged)");
  return { adminToken: randomBytes(24).toString("base64url"), adminTokenGenerated: true };
}
