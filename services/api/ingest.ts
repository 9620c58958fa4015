import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import type { StoredCall } from "@hookpost/contract";
import { Code, DEFAULT_MAX_BATCH_CALLS } from "@hookpost/contract";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import {
  AttemptReader,
  addService,
  ConfigError,
  ConfigStore,
  connectNats,
  createLogger,
  DEFAULT_GRPC_LIMITS,
  DeadLetters,
  ensureBucketLimits,
  ensureTopology,
  type GrpcListener,
  type GrpcListenerStats,
  type GrpcServerLimits,
  grpcServerOptions,
  HealthAggregate,
  type Logger,
  listenError,
  listenGrpc,
  MembershipStore,
  type OpsServer,
  registerConfigRevision,
  StreamWatch,
  startOpsServer,
  UserSourceIndex,
} from "@hookpost/core";
import { HealthImplementation, type ServingStatus } from "grpc-health-check";
import { adminService } from "./admin/admin-service.js";
import { AdminAuth } from "./auth.js";
import { ingestService } from "./calls/ingest-service.js";
import { CallIntake } from "./calls/intake.js";
import { MAX_RECEIVE_BYTES } from "./calls/limits.js";
import { EventPublisher } from "./calls/publish.js";
import { defaultSourceQuota, SourceQuota } from "./calls/quota.js";
import { DEFAULT_STREAM_CHECK_MS, type IngestConfig } from "./config.js";
import { createConsoleHandler } from "./console/console-handler.js";
import { DEFAULT_HTTP_LIMITS } from "./http/limits.js";
import { segmentApi } from "./http/segment-api.js";
import { type HttpServer, type Mount, startHttpServer } from "./http/server.js";
import { IngestMetrics } from "./metrics.js";
import { DEFAULT_SYNC_LIMITS } from "./sync/sync-env.js";
import { SyncLimiter } from "./sync/sync-limiter.js";
import { syncService } from "./sync/sync-service.js";
import { sweepSyncTemp } from "./sync/sync-temp.js";

export interface IngestOptions {
  logger?: Logger;
  /** Extra handlers on the HTTP listener (HTTP_ADDR), tried after the Segment API, before the 404. */
  httpMounts?: readonly Mount[];
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
const HEALTH_SERVICES = ["", IngestService.typeName, AdminService.typeName];

/**
 * Starts the ingest service: waits for NATS, creates the streams and the configuration
 * bucket (idempotently), loads the configuration, then serves IngestService and
 * AdminService (and grpc.health.v1) over gRPC.
 */
export async function startIngest(config: IngestConfig, options: IngestOptions = {}): Promise<IngestHandle> {
  const log = options.logger ?? createLogger("ingest", config.logLevel);
  const adminTokenGenerated = config.adminToken === undefined;
  const adminToken = config.adminToken ?? randomBytes(24).toString("base64url");
  if (adminTokenGenerated) {
    log.warn("ADMIN_TOKEN is not set: generated a random admin token for this run (it is not logged)");
  }
  const credentials = await serverCredentials(config);

  const metrics = new IngestMetrics({ defaultMetrics: config.opsAddress !== undefined });
  // NATS URLs may carry credentials (nats://user:pass@host): never log those.
  log.info(
    { nats: config.natsUrl.replace(/\/\/[^@/]*@/g, "//***@") },
    "connecting to NATS (waits until it is up)",
  );
  const nc = await connectNats(config.natsUrl, "hookpost-ingest", log);
  let store: ConfigStore | undefined;
  let server: Server | undefined;
  let ops: OpsServer | undefined;
  let listener: GrpcListener | undefined;
  let http: HttpServer | undefined;
  let healthFeed: HealthAggregate | undefined;
  let quota: SourceQuota | undefined;
  let streamWatch: StreamWatch | undefined;
  let closing = false;
  // Created first so that it tracks the connection from the start.
  const publisher = new EventPublisher(nc, log, {
    timeoutMs: config.publishTimeoutMs,
    onPublished: (type, outcome, ms) => metrics.published(type, outcome, ms),
  });
  try {
    const replicas = { replicas: config.topology.replicas };
    const opened = await untilReady(log, "create streams and load configuration", async () => {
      const jsm = await nc.jetstreamManager();
      await ensureTopology(jsm, config.topology);
      const stores = await Promise.all([
        ConfigStore.open(nc, replicas),
        UserSourceIndex.open(nc, replicas),
        MembershipStore.open(nc, replicas),
        DeadLetters.open(nc),
      ]);
      // The stores create their buckets without a byte limit.
      await ensureBucketLimits(jsm, config.topology);
      return stores;
    });
    store = opened[0];
    const configStore = store;
    registerConfigRevision(metrics.registry, () => configStore.revision);
    const [, index, memberships, deadLetters] = opened;

    const health = new HealthImplementation(Object.fromEntries(HEALTH_SERVICES.map((s) => [s, "SERVING"])));
    const setHealth = (status: ServingStatus) => {
      for (const s of HEALTH_SERVICES) health.setStatus(s, status);
    };
    metrics.natsConnected(true);
    publisher.onStatus((up) => {
      metrics.natsConnected(up);
      setHealth(up ? "SERVING" : "NOT_SERVING");
      if (!up) {
        log.warn("NATS connection lost: answering UNAVAILABLE until it is back");
        return;
      }
      log.info("NATS connection is back: taking calls again");
      // A server that came back without its store (no volume) has lost the streams: recreate
      // them, as at start. Idempotent when they are there.
      void (async () => {
        try {
          await ensureTopology(await nc.jetstreamManager(), config.topology);
        } catch (err) {
          log.warn({ err: (err as Error).message }, "could not check the streams after reconnecting");
        }
      })();
    });

    const adminAuth = new AdminAuth(adminToken);
    const grpcLimits = config.grpc ?? DEFAULT_GRPC_LIMITS;
    server = new Server({
      "grpc.max_receive_message_length": MAX_RECEIVE_BYTES,
      ...grpcServerOptions(grpcLimits),
    });
    const serveOptions = {
      onCallEnd: (method: string, code: Code, ms: number) => {
        metrics.callEnded("grpc", method, code, ms);
        // Not even the log object is built per call unless debug logging is on.
        if (log.isLevelEnabled("debug")) {
          log.debug({ transport: "grpc", method, code: Code[code], ms: Math.round(ms * 10) / 10 }, "call");
        }
      },
      onInternalError: (method: string, err: unknown) =>
        log.error(
          { transport: "grpc", method, err: err instanceof Error ? err.message : String(err) },
          "internal error",
        ),
    };
    const limiter = new SyncLimiter(config.sync ?? DEFAULT_SYNC_LIMITS);
    await sweepSyncTemp(limiter.limits.tmpDir, log);
    metrics.watchSyncs(limiter);
    const publish = async (c: StoredCall) => {
      await publisher.publish(c);
    };
    quota = new SourceQuota(config.quota ?? defaultSourceQuota(config.topology), {
      jsm: await nc.jetstreamManager(),
      store,
      log,
      onRefused: (limit) => metrics.quotaRefused(limit),
    });
    await quota.start();
    const intake = new CallIntake(publisher, index, { quota });
    streamWatch = new StreamWatch(
      await nc.jetstreamManager(),
      config.topology,
      log,
      config.streamCheckMs ?? DEFAULT_STREAM_CHECK_MS,
    );
    streamWatch.register(metrics.registry);
    streamWatch.start();
    const maxBatchCalls = config.maxBatchCalls ?? DEFAULT_MAX_BATCH_CALLS;
    addService(
      server,
      IngestService,
      {
        ...ingestService({
          store,
          publisher,
          adminAuth,
          nc,
          log,
          index,
          intake,
          maxBatchCalls,
        }),
        // The sync RPCs, with their limits.
        ...syncService({ store, limiter, nc, log, memberships, index, publish, quota }),
      },
      serveOptions,
    );
    const jsm = await nc.jetstreamManager();
    healthFeed = new HealthAggregate(nc, log);
    healthFeed.start();
    const feed = healthFeed;
    store.on("change", (c) => {
      if (c.kind === "destination" && !c.record) feed.forget(c.id);
    });
    const adminDeps = {
      store,
      jsm,
      attempts: new AttemptReader(jsm),
      health: healthFeed,
      log,
      adminAuth,
      natsConnected: () => publisher.connected,
      onSourceDeleted: (id: string) => index.forgetSource(id),
      deadLetters,
    };
    const admin = adminService(adminDeps);
    addService(server, AdminService, admin, serveOptions);
    health.addToServer(server);

    listener = await listen(server, config.address, credentials, grpcLimits);
    const port = listener.port;
    metrics.watchConnections(listener.stats);
    const host = config.address.slice(0, config.address.lastIndexOf(":"));
    const address = `${host}:${port}`;

    if (config.httpAddress !== undefined) {
      http = await startHttp(config, config.httpAddress, { store, intake, log, metrics, maxBatchCalls }, [
        createConsoleHandler({ admin, serveOptions }),
        ...(options.httpMounts ?? []),
      ]);
    }

    if (config.opsAddress !== undefined) {
      ops = await startOpsServer({
        address: config.opsAddress,
        ...(config.opsLimits && { limits: config.opsLimits }),
        registry: metrics.registry,
        readiness: () => ({
          ready: publisher.connected && !closing,
          detail: { nats: publisher.connected, grpc: address, closing, configRevision: configStore.revision },
        }),
      });
    }

    let closed: Promise<void> | undefined;
    const grpcServer = server;
    const opsServer = ops;
    const grpcListener = listener;
    const httpServer = http;
    return {
      address,
      httpAddress: http?.address,
      adminToken,
      adminTokenGenerated,
      opsAddress: ops?.address,
      metrics,
      grpcConnections: listener.stats,
      close: () => {
        closed ??= (async () => {
          closing = true;
          setHealth("NOT_SERVING");
          const stopListening = grpcListener.close();
          await Promise.all([shutdown(grpcServer, log), httpServer?.close(SHUTDOWN_GRACE_MS)]);
          await stopListening;
          await opsServer?.close();
          configStore.close();
          healthFeed?.close();
          quota?.close();
          streamWatch?.close();
          // Drain flushes what is pending; bounded, as it cannot finish while NATS is away.
          const drained = await Promise.race([
            nc.drain().then(
              () => true,
              () => false,
            ),
            sleep(DRAIN_TIMEOUT_MS, false, { ref: false }),
          ]);
          if (!drained) await nc.close().catch(() => {});
          log.info("ingest stopped");
        })();
        return closed;
      },
    };
  } catch (err) {
    server?.forceShutdown();
    await listener?.close();
    await http?.close(0);
    healthFeed?.close();
    quota?.close();
    streamWatch?.close();
    await ops?.close();
    store?.close();
    await nc.close().catch(() => {});
    throw err;
  }
}

/** The HTTP listener (HTTP_ADDR): the Segment API answers /v1/*; the console and AdminService over Connect the rest. */
async function startHttp(
  config: IngestConfig,
  address: string,
  deps: Omit<Parameters<typeof segmentApi>[0], "maxBodyBytes">,
  mounts: readonly Mount[],
): Promise<HttpServer> {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...config.http };
  const api = segmentApi({ ...deps, maxBodyBytes: limits.maxBodyBytes });
  const http = await startHttpServer({
    address,
    limits,
    mounts: [api, ...mounts],
    onError: (err) => deps.log.error({ transport: "http", err: (err as Error)?.message }, "internal error"),
  });
  deps.metrics.watchHttpConnections(http.connections);
  deps.log.info(
    { address: http.address },
    "HTTP listening: Segment-compatible API, console, AdminService over Connect",
  );
  return http;
}

async function serverCredentials(config: IngestConfig): Promise<ServerCredentials> {
  if (!config.tls) return ServerCredentials.createInsecure();
  const read = async (file: string, name: string) => {
    try {
      return await readFile(file);
    } catch (err) {
      throw new ConfigError(`${name}: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  const cert = await read(config.tls.certFile, "TLS_CERT_FILE");
  const key = await read(config.tls.keyFile, "TLS_KEY_FILE");
  try {
    return ServerCredentials.createSsl(null, [{ cert_chain: cert, private_key: key }], false);
  } catch (err) {
    throw new ConfigError(`TLS_CERT_FILE/TLS_KEY_FILE: ${(err as Error).message}`);
  }
}

async function listen(
  server: Server,
  address: string,
  credentials: ServerCredentials,
  limits: GrpcServerLimits,
): Promise<GrpcListener> {
  try {
    return await listenGrpc(server, address, credentials, limits);
  } catch (err) {
    throw listenError("INGEST_ADDR", address, err);
  }
}

/** Stops accepting calls and waits for in-flight ones, at most SHUTDOWN_GRACE_MS. */
async function shutdown(server: Server, log: Logger): Promise<void> {
  const graceful = new Promise<boolean>((resolve) => server.tryShutdown(() => resolve(true)));
  const timer = sleep(SHUTDOWN_GRACE_MS, false, { ref: false });
  if (!(await Promise.race([graceful, timer]))) {
    log.warn({ graceMs: SHUTDOWN_GRACE_MS }, "in-flight calls did not finish in time: cancelling them");
    server.forceShutdown();
  }
}

/** Retries a start-up step until it succeeds (NATS or JetStream may still be starting). */
async function untilReady<T>(log: Logger, what: string, step: () => Promise<T>): Promise<T> {
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await step();
    } catch (err) {
      log.warn({ err: (err as Error).message, retryInMs: delay }, `cannot ${what} yet; retrying`);
      await sleep(delay);
    }
  }
}
