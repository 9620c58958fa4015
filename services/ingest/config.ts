import { ConfigError, envInt, envOptional, envString } from "../../lib/env/read-env.js";
import { topologyFromEnv } from "../../lib/env/topology-env.js";
import type { TopologySettings } from "../../lib/nats/topology.js";

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
  /** HTTP_ADDR: the web console and AdminService over Connect; absent (or `off`) for none. */
  httpAddress?: string;
  /** PUBLISH_TIMEOUT_MS: how long to wait for JetStream to confirm a call. */
  publishTimeoutMs: number;
  /** LOG_LEVEL. */
  logLevel: string;
  topology: TopologySettings;
}

export const DEFAULT_INGEST_ADDR = "0.0.0.0:50051";
export const DEFAULT_INGEST_OPS_ADDR = "0.0.0.0:9090";
export const DEFAULT_HTTP_ADDR = "0.0.0.0:8080";
export const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;

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

  const config: IngestConfig = {
    natsUrl: envString(env, "NATS_URL", "nats://127.0.0.1:4222"),
    address,
    publishTimeoutMs: envInt(env, "PUBLISH_TIMEOUT_MS", DEFAULT_PUBLISH_TIMEOUT_MS, 100),
    logLevel: envString(env, "LOG_LEVEL", "info"),
    topology: topologyFromEnv(env),
  };
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
