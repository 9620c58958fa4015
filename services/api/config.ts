import { DEFAULT_MAX_BATCH_CALLS, MAX_BATCH_BYTES } from "@hookpost/contract";
import type { GrpcServerLimits, OpsLimits, TopologySettings } from "@hookpost/core";
import {
  ConfigError,
  envDuration,
  envInt,
  envOptional,
  envString,
  grpcLimitsFromEnv,
  opsLimitsFromEnv,
  topologyFromEnv,
} from "@hookpost/core";
import { defaultSourceQuota, type SourceQuotaSettings } from "./calls/quota.js";
import { DEFAULT_HTTP_ADDR, DEFAULT_HTTP_LIMITS, type HttpLimits } from "./http/limits.js";
import { syncLimitsFromEnv } from "./sync/sync-env.js";
import type { SyncLimits } from "./sync/sync-limiter.js";

/** Everything the ingest service needs to start. */
export interface IngestConfig {
  /** NATS_URL: one URL or a comma-separated list. */
  natsUrl: string;
  /** INGEST_ADDR: gRPC `host:port`; port 0 picks a free one. */
  address: string;
  /** ADMIN_TOKEN; when absent a random token is generated at start (see IngestHandle.adminToken). */
  adminToken?: string;
  /** TLS_CERT_FILE + TLS_KEY_FILE: serve gRPC over TLS when both are set. */
  tls?: { certFile: string; keyFile: string };
  /** OPS_ADDR: HTTP `/healthz`, `/readyz`, `/metrics`; absent (or `off`) for none. */
  opsAddress?: string;
  /** PUBLISH_TIMEOUT_MS: how long JetStream has to confirm a call, retries through an election included. */
  publishTimeoutMs: number;
  /** LOG_LEVEL. */
  logLevel: string;
  topology: TopologySettings;
  /** GRPC_* limits (README "Limits"); DEFAULT_GRPC_LIMITS when absent. */
  grpc?: GrpcServerLimits;
  /** OPS_* limits of the ops port; DEFAULT_OPS_LIMITS when absent. */
  opsLimits?: OpsLimits;
  /** SYNC_* limits of SyncAudience / SyncComputedTrait; DEFAULT_SYNC_LIMITS when absent. */
  sync?: SyncLimits;
  /** HTTP_ADDR: the Segment-compatible HTTP API; absent (or `off`) for none. */
  httpAddress?: string;
  /** HTTP_MAX_BODY_BYTES, HTTP_MAX_CONNECTIONS, HTTP_*_TIMEOUT (defaults: DEFAULT_HTTP_LIMITS). */
  http?: Partial<HttpLimits>;
  /** MAX_BATCH_CALLS: calls one batch may carry, on both transports (default 2500). */
  maxBatchCalls?: number;
  /** SOURCE_MAX_PENDING_BYTES, SOURCE_MAX_RATE, SOURCE_MAX_BURST, SOURCE_QUOTA_REFRESH; defaultSourceQuota when absent. */
  quota?: SourceQuotaSettings;
  /** STREAM_CHECK_INTERVAL: how often streams' bytes and limits are read (metrics, bucket limits). */
  streamCheckMs?: number;
}

export const DEFAULT_STREAM_CHECK_MS = 10_000;

export const DEFAULT_INGEST_ADDR = "0.0.0.0:50051";
export const DEFAULT_INGEST_OPS_ADDR = "127.0.0.1:9090";
// Rides out a JetStream leader election (4-9 s on nats-server 2.9) within the client's 10 s deadline.
export const DEFAULT_PUBLISH_TIMEOUT_MS = 8_000;

type Env = Record<string, string | undefined>;

/** Reads the configuration from environment variables; throws ConfigError naming a bad one. */
export function ingestConfigFromEnv(env: Env): IngestConfig {
  const certFile = envOptional(env, "TLS_CERT_FILE");
  const keyFile = envOptional(env, "TLS_KEY_FILE");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError("TLS_CERT_FILE and TLS_KEY_FILE must be set together (or neither, for plaintext)");
  }
  const address = envString(env, "INGEST_ADDR", DEFAULT_INGEST_ADDR);
  checkHostPort("INGEST_ADDR", address);
  const ops = envString(env, "OPS_ADDR", DEFAULT_INGEST_OPS_ADDR);
  if (ops !== "off") checkHostPort("OPS_ADDR", ops);
  const http = envString(env, "HTTP_ADDR", DEFAULT_HTTP_ADDR);
  if (http !== "off") checkHostPort("HTTP_ADDR", http);
  const d = DEFAULT_HTTP_LIMITS;
  const maxBodyBytes = envInt(env, "HTTP_MAX_BODY_BYTES", d.maxBodyBytes, 1024);
  if (maxBodyBytes > MAX_BATCH_BYTES) {
    throw new ConfigError(
      `HTTP_MAX_BODY_BYTES must be at most ${MAX_BATCH_BYTES} (the batch limit), got ${maxBodyBytes}`,
    );
  }

  const topology = topologyFromEnv(env);
  const q = defaultSourceQuota(topology);
  const config: IngestConfig = {
    natsUrl: envString(env, "NATS_URL", "nats://127.0.0.1:4222"),
    address,
    publishTimeoutMs: envInt(env, "PUBLISH_TIMEOUT_MS", DEFAULT_PUBLISH_TIMEOUT_MS, 100),
    logLevel: envString(env, "LOG_LEVEL", "info"),
    topology,
    quota: {
      maxPendingBytes: envInt(env, "SOURCE_MAX_PENDING_BYTES", q.maxPendingBytes, 1),
      maxRate: envInt(env, "SOURCE_MAX_RATE", q.maxRate, 1),
      burst: envInt(env, "SOURCE_MAX_BURST", q.burst, 1),
      refreshMs: envDuration(env, "SOURCE_QUOTA_REFRESH", q.refreshMs),
    },
    streamCheckMs: envDuration(env, "STREAM_CHECK_INTERVAL", DEFAULT_STREAM_CHECK_MS),
    grpc: grpcLimitsFromEnv(env),
    opsLimits: opsLimitsFromEnv(env),
    sync: syncLimitsFromEnv(env),
    maxBatchCalls: envInt(env, "MAX_BATCH_CALLS", DEFAULT_MAX_BATCH_CALLS, 1),
    http: {
      maxBodyBytes,
      maxConnections: envInt(env, "HTTP_MAX_CONNECTIONS", d.maxConnections, 1),
      maxConnectionsPerIp: envInt(env, "HTTP_MAX_CONNECTIONS_PER_IP", d.maxConnectionsPerIp, 1),
      headersTimeoutMs: envDuration(env, "HTTP_HEADERS_TIMEOUT", d.headersTimeoutMs),
      requestTimeoutMs: envDuration(env, "HTTP_REQUEST_TIMEOUT", d.requestTimeoutMs),
      keepAliveTimeoutMs: envDuration(env, "HTTP_KEEPALIVE_TIMEOUT", d.keepAliveTimeoutMs),
    },
  };
  if (http !== "off") config.httpAddress = http;
  const token = envOptional(env, "ADMIN_TOKEN");
  if (token !== undefined) config.adminToken = token;
  if (certFile !== undefined && keyFile !== undefined) config.tls = { certFile, keyFile };
  if (ops !== "off") config.opsAddress = ops;
  if (http !== "off") config.httpAddress = http;
  return config;
}

function checkHostPort(name: string, value: string): void {
  const i = value.lastIndexOf(":");
  const port = Number(value.slice(i + 1));
  if (i <= 0 || !/^\d+$/.test(value.slice(i + 1)) || port > 65535) {
    throw new ConfigError(`${name} must be host:port (e.g. 0.0.0.0:50051), got "${value}"`);
  }
}
