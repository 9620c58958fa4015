import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { Code } from "@hookpost/contract";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import {
  addService,
  ConfigError,
  DEFAULT_GRPC_LIMITS,
  type GrpcListener,
  type GrpcListenerStats,
  grpcServerOptions,
  type Logger,
  listenError,
  listenGrpc,
  type ServeOptions,
  type ServiceImpl,
} from "@hookpost/core";
import { HealthImplementation, type ServingStatus } from "grpc-health-check";
import { MAX_RECEIVE_BYTES } from "../calls/limits.js";
import type { IngestConfig } from "../config.js";
import type { IngestMetrics } from "../metrics.js";

const HEALTH_SERVICES = ["", IngestService.typeName, AdminService.typeName];

/** The gRPC port (INGEST_ADDR): IngestService, AdminService and grpc.health.v1 on one server. */
export interface GrpcPart {
  /** Metrics and logging of each call; the Connect edge (console) uses the same. */
  readonly serveOptions: ServeOptions;
  add<S extends GenServiceMethods>(service: GenService<S>, impl: ServiceImpl<S>): void;
  /** grpc.health.v1's answer for every service. */
  setHealth(status: ServingStatus): void;
  /** Binds the port; resolves `host:port` (the real port when INGEST_ADDR asked for 0). */
  listen(): Promise<{ address: string; stats: GrpcListenerStats }>;
  /** Stops accepting calls and lets in-flight ones finish, at most `graceMs`, then cancels them. */
  close(graceMs: number): Promise<void>;
  /** Cancels everything at once (a start that failed half way). */
  abort(): Promise<void>;
}

/**
 * Builds the gRPC server of the API. Reads the TLS files first, so that a bad one stops the
 * start before it waits for NATS.
 */
export async function grpcServer(
  config: Pick<IngestConfig, "address" | "tls" | "grpc">,
  deps: { metrics: IngestMetrics; log: Logger },
): Promise<GrpcPart> {
  const { metrics, log } = deps;
  const credentials = await serverCredentials(config);
  const limits = config.grpc ?? DEFAULT_GRPC_LIMITS;
  const server = new Server({
    "grpc.max_receive_message_length": MAX_RECEIVE_BYTES,
    ...grpcServerOptions(limits),
  });
  const health = new HealthImplementation(Object.fromEntries(HEALTH_SERVICES.map((s) => [s, "SERVING"])));
  health.addToServer(server);
  const serveOptions: ServeOptions = {
    onCallEnd: (method, code, ms) => {
      metrics.callEnded("grpc", method, code, ms);
      // Not even the log object is built per call unless debug logging is on.
      if (log.isLevelEnabled("debug")) {
        log.debug({ transport: "grpc", method, code: Code[code], ms: Math.round(ms * 10) / 10 }, "call");
      }
    },
    onInternalError: (method, err) =>
      log.error(
        { transport: "grpc", method, err: err instanceof Error ? err.message : String(err) },
        "internal error",
      ),
  };
  let listener: GrpcListener | undefined;
  return {
    serveOptions,
    add: (service, impl) => addService(server, service, impl, serveOptions),
    setHealth: (status) => {
      for (const s of HEALTH_SERVICES) health.setStatus(s, status);
    },
    listen: async () => {
      try {
        listener = await listenGrpc(server, config.address, credentials, limits);
      } catch (err) {
        throw listenError("INGEST_ADDR", config.address, err);
      }
      metrics.watchConnections(listener.stats);
      const host = config.address.slice(0, config.address.lastIndexOf(":"));
      return { address: `${host}:${listener.port}`, stats: listener.stats };
    },
    close: async (graceMs) => {
      const stopListening = listener?.close();
      await shutdown(server, graceMs, log);
      await stopListening;
    },
    abort: async () => {
      server.forceShutdown();
      await listener?.close();
    },
  };
}

async function serverCredentials(config: Pick<IngestConfig, "tls">): Promise<ServerCredentials> {
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

/** Stops accepting calls and waits for in-flight ones, at most `graceMs`. */
async function shutdown(server: Server, graceMs: number, log: Logger): Promise<void> {
  const graceful = new Promise<boolean>((resolve) => server.tryShutdown(() => resolve(true)));
  const timer = sleep(graceMs, false, { ref: false });
  if (!(await Promise.race([graceful, timer]))) {
    log.warn({ graceMs }, "in-flight calls did not finish in time: cancelling them");
    server.forceShutdown();
  }
}
