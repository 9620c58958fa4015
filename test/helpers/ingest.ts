import { type IngestConfig, type IngestHandle, startIngest } from "@hookpost/api";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import { quietLogger } from "./quiet-logger.js";
import { type ServiceProcess, spawnService } from "./service-process.js";

/** An in-process ingest's configuration for tests: a free loopback gRPC port, silent, the default topology. */
export function testIngestConfig(
  natsUrl: string,
  adminToken: string,
  overrides: Partial<IngestConfig> = {},
): IngestConfig {
  return {
    natsUrl,
    address: "127.0.0.1:0",
    adminToken,
    publishTimeoutMs: 5_000,
    logLevel: "silent",
    topology: { ...DEFAULT_TOPOLOGY },
    ...overrides,
  };
}

/** An in-process ingest (testIngestConfig) that logs nothing. */
export function startTestIngest(
  natsUrl: string,
  adminToken: string,
  overrides: Partial<IngestConfig> = {},
): Promise<IngestHandle> {
  return startIngest(testIngestConfig(natsUrl, adminToken, overrides), { logger: quietLogger });
}

/**
 * The API service as a real process (services/api/main.ts): a free loopback gRPC port, no ops
 * port and no HTTP listener unless `env` asks, info logs (tests wait for "ingest listening").
 */
export function spawnIngest(
  natsUrl: string,
  adminToken: string,
  env: Record<string, string> = {},
): ServiceProcess {
  return spawnService("services/api/main.ts", {
    NATS_URL: natsUrl,
    INGEST_ADDR: "127.0.0.1:0",
    OPS_ADDR: "off",
    ADMIN_TOKEN: adminToken,
    LOG_LEVEL: "info",
    ...env,
  });
}
