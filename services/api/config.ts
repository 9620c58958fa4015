import { MAX_BATCH_BYTES } from "@hookpost/contract";
import type { GrpcServerLimits, Keyring, OpsLimits, Settings, TopologySettings } from "@hookpost/core";
import {
  ConfigError,
  grpcLimitsFrom,
  keyringFrom,
  loadSettings,
  opsLimitsFrom,
  setOnly,
  topologyFrom,
} from "@hookpost/core";
import { defaultSourceQuota, type SourceQuotaSettings } from "./calls/quota.js";
import type { HttpLimits } from "./http/limits.js";
import { syncLimitsFrom } from "./sync/sync-env.js";
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
  /**
   * HTTP_PUBLIC_URL: where browsers and apps reach the HTTP API (no trailing slash), answered by
   * the settings path as the SDKs' apiHost and protocol; absent: the request's Host, over http.
   */
  httpPublicUrl?: string;
  /** HTTP_MAX_BODY_BYTES, HTTP_MAX_CONNECTIONS, HTTP_*_TIMEOUT (defaults: DEFAULT_HTTP_LIMITS). */
  http?: Partial<HttpLimits>;
  /** MAX_BATCH_CALLS: calls one batch may carry, on both transports (default 2500). */
  maxBatchCalls?: number;
  /** SOURCE_MAX_PENDING_BYTES, SOURCE_MAX_RATE, SOURCE_MAX_BURST, SOURCE_QUOTA_REFRESH, SOURCE_MAX_USERS, SOURCE_MAX_MEMBERSHIP_BYTES, SOURCE_MAX_AUDIT_BYTES; defaultSourceQuota when absent. */
  quota?: SourceQuotaSettings;
  /** STREAM_CHECK_INTERVAL: how often streams' bytes and limits are read (metrics, bucket limits). */
  streamCheckMs?: number;
  /** SECRETS_KEYS (or SECRETS_KEYS_FILE): encrypt secrets at rest; absent: stored in plain text. */
  keyring?: Keyring;
  /** ERASURE_INTERVAL, ERASURE_SETTLE, DELETION_STATUS_MAX_AGE; DEFAULT_ERASURE when absent. */
  erasure?: ErasureSettings;
  /** CONSOLE_URL: where users reach the console; portal link URLs start with it. */
  consoleUrl?: string;
  /** CONSOLE_FRAME_ANCESTORS: sites that may frame the console; absent or empty: none. */
  frameAncestors?: string[];
}

export interface ErasureSettings {
  intervalMs: number;
  settleMs: number;
  statusMaxAgeMs: number;
}

/** The schema's defaults (packages/core/src/config/schema.ts), for configurations built in code. */
export const DEFAULT_ERASURE: ErasureSettings = {
  intervalMs: 15_000,
  settleMs: 60_000,
  statusMaxAgeMs: 30 * 86_400_000,
};

const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

export const DEFAULT_STREAM_CHECK_MS = 10_000;

export const DEFAULT_INGEST_ADDR = "0.0.0.0:50051";
export const DEFAULT_INGEST_OPS_ADDR = "127.0.0.1:9090";
// Rides out a JetStream leader election (4-9 s on nats-server 2.9) within the client's 10 s deadline.
export const DEFAULT_PUBLISH_TIMEOUT_MS = 8_000;

type Env = Record<string, string | undefined>;

/** Reads the configuration from environment variables; throws ConfigError naming a bad one. */
export function ingestConfigFromEnv(env: Env): IngestConfig {
  return ingestConfigFrom(loadSettings("api", env));
}

/** The ingest configuration from its settings (packages/core/src/config/schema.ts). */
export function ingestConfigFrom(s: Settings): IngestConfig {
  const certFile = s.TLS_CERT_FILE;
  const keyFile = s.TLS_KEY_FILE;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError("TLS_CERT_FILE and TLS_KEY_FILE must be set together (or neither, for plaintext)");
  }
  if (s.HTTP_MAX_BODY_BYTES > MAX_BATCH_BYTES) {
    throw new ConfigError(
      `HTTP_MAX_BODY_BYTES must be at most ${MAX_BATCH_BYTES} (the batch limit), got ${s.HTTP_MAX_BODY_BYTES}`,
    );
  }
  const topology = topologyFrom(s);
  const q = defaultSourceQuota(topology);
  const keyring = keyringFrom(s);
  return {
    natsUrl: s.NATS_URL ?? DEFAULT_NATS_URL,
    address: s.INGEST_ADDR,
    publishTimeoutMs: s.PUBLISH_TIMEOUT,
    logLevel: s.LOG_LEVEL,
    topology,
    quota: {
      maxPendingBytes: s.SOURCE_MAX_PENDING_BYTES ?? q.maxPendingBytes,
      maxRate: s.SOURCE_MAX_RATE,
      burst: s.SOURCE_MAX_BURST,
      refreshMs: s.SOURCE_QUOTA_REFRESH,
      maxUsers: s.SOURCE_MAX_USERS ?? q.maxUsers,
      maxMembershipBytes: s.SOURCE_MAX_MEMBERSHIP_BYTES ?? q.maxMembershipBytes,
      maxAuditBytes: s.SOURCE_MAX_AUDIT_BYTES ?? q.maxAuditBytes,
    },
    streamCheckMs: s.STREAM_CHECK_INTERVAL,
    erasure: {
      intervalMs: s.ERASURE_INTERVAL,
      settleMs: s.ERASURE_SETTLE,
      statusMaxAgeMs: s.DELETION_STATUS_MAX_AGE,
    },
    grpc: grpcLimitsFrom(s),
    opsLimits: opsLimitsFrom(s),
    sync: syncLimitsFrom(s),
    maxBatchCalls: s.MAX_BATCH_CALLS,
    http: {
      maxBodyBytes: s.HTTP_MAX_BODY_BYTES,
      maxConnections: s.HTTP_MAX_CONNECTIONS,
      maxConnectionsPerIp: s.HTTP_MAX_CONNECTIONS_PER_IP,
      headersTimeoutMs: s.HTTP_HEADERS_TIMEOUT,
      requestTimeoutMs: s.HTTP_REQUEST_TIMEOUT,
      keepAliveTimeoutMs: s.HTTP_KEEPALIVE_TIMEOUT,
    },
    ...setOnly({
      httpAddress: s.HTTP_ADDR,
      httpPublicUrl: s.HTTP_PUBLIC_URL,
      consoleUrl: s.CONSOLE_URL,
      frameAncestors: s.CONSOLE_FRAME_ANCESTORS,
      opsAddress: s.OPS_ADDR,
      adminToken: s.ADMIN_TOKEN,
      keyring,
    }),
    ...(certFile !== undefined && keyFile !== undefined ? { tls: { certFile, keyFile } } : {}),
  };
}
