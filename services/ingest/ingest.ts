import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { HealthImplementation, type ServingStatus } from "grpc-health-check";
import { AdminService } from "../../gen/hookpost/v1/admin_pb.js";
import { IngestService } from "../../gen/hookpost/v1/ingest_pb.js";
import { ConfigStore } from "../../lib/config/config-store.js";
import { DeadLetters } from "../../lib/dead-letters/mod.js";
import { ConfigError } from "../../lib/env/read-env.js";
import { addService, Code } from "../../lib/grpc/mod.js";
import { createLogger, type Logger } from "../../lib/log/logger.js";
import { MembershipStore } from "../../lib/membership/membership-store.js";
import { connectNats } from "../../lib/nats/connect.js";
import { ensureTopology } from "../../lib/nats/topology.js";
import { type OpsServer, startOpsServer } from "../../lib/ops/ops-server.js";
import { UserSourceIndex } from "../../lib/users/user-source-index.js";
import { adminService } from "./admin/admin-service.js";
import { AdminAuth } from "./auth.js";
import { ingestService } from "./calls/ingest-service.js";
import { MAX_RECEIVE_BYTES } from "./calls/limits.js";
import { EventPublisher } from "./calls/publish.js";
import type { IngestConfig } from "./config.js";
import { createConsoleHandler } from "./console/console-handler.js";
import { type HttpListener, startHttpListener } from "./console/http-listener.js";
import { IngestMetrics } from "./metrics.js";

export interface IngestOptions {
  logger?: Logger;
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
  /** `host:port` of the web console (`/console/`) and AdminService over Connect, when HTTP_ADDR is set. */
  readonly httpAddress: string | undefined;
  readonly metrics: IngestMetrics;
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
  let http: HttpListener | undefined;
  let closing = false;
  // Created first so that it tracks the connection from the start.
  const publisher = new EventPublisher(nc, log, {
    timeoutMs: config.publishTimeoutMs,
    onPublished: (type, outcome, ms) => metrics.published(type, outcome, ms),
  });
  try {
    const replicas = { replicas: config.topology.replicas };
    const opened = await untilReady(log, "create streams and load configuration", async () => {
      await ensureTopology(await nc.jetstreamManager(), config.topology);
      return Promise.all([
        ConfigStore.open(nc, replicas),
        UserSourceIndex.open(nc, replicas),
        MembershipStore.open(nc, replicas),
        DeadLetters.open(nc),
      ]);
    });
    store = opened[0];
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
    server = new Server({
      "grpc.max_receive_message_length": MAX_RECEIVE_BYTES,
    });
    const serveOptions = {
      onCallEnd: (method: string, code: Code, ms: number) => {
        metrics.callEnded(method, code, ms);
        log.debug({ method, code: Code[code], ms: Math.round(ms * 10) / 10 }, "call");
      },
      onInternalError: (method: string, err: unknown) =>
        log.error({ method, err: err instanceof Error ? err.message : String(err) }, "internal error"),
    };
    addService(
      server,
      IngestService,
      ingestService({ store, publisher, adminAuth, nc, log, index, memberships }),
      serveOptions,
    );
    const adminDeps = {
      store,
      log,
      adminAuth,
      natsConnected: () => publisher.connected,
      onSourceDeleted: (id: string) => index.forgetSource(id),
      deadLetters,
    };
    const admin = adminService(adminDeps);
    addService(server, AdminService, admin, serveOptions);
    health.addToServer(server);

    const port = await bind(server, config.address, credentials);
    const host = config.address.slice(0, config.address.lastIndexOf(":"));
    const address = `${host}:${port}`;

    if (config.opsAddress !== undefined) {
      ops = await startOpsServer({
        address: config.opsAddress,
        registry: metrics.registry,
        readiness: () => ({
          ready: publisher.connected && !closing,
          detail: { nats: publisher.connected, grpc: address, closing },
        }),
      });
    }

    if (config.httpAddress !== undefined) {
      http = await startHttpListener(
        config.httpAddress,
        [createConsoleHandler({ admin, serveOptions })],
        log,
      );
    }

    let closed: Promise<void> | undefined;
    const grpcServer = server;
    const configStore = store;
    const opsServer = ops;
    const httpListener = http;
    return {
      address,
      adminToken,
      adminTokenGenerated,
      opsAddress: ops?.address,
      httpAddress: http?.address,
      metrics,
      close: () => {
        closed ??= (async () => {
          closing = true;
          setHealth("NOT_SERVING");
          await shutdown(grpcServer, log);
          await httpListener?.close();
          await opsServer?.close();
          configStore.close();
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
    await http?.close();
    await ops?.close();
    store?.close();
    await nc.close().catch(() => {});
    throw err;
  }
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

function bind(server: Server, address: string, credentials: ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (err, port) => {
      if (err) reject(new ConfigError(`INGEST_ADDR ${address}: cannot listen: ${err.message}`));
      else resolve(port);
    });
  });
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
