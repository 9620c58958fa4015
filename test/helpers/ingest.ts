import { type IngestConfig, type IngestHandle, startIngest } from "@hookpost/api";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import { afterAll, beforeAll } from "vitest";
import { quietLogger } from "./quiet-logger.js";
import { killIfRunning, type LogRecord, type ServiceProcess, spawnService } from "./service-process.js";
import type { NatsFixture } from "./use-nats.js";

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

/** An ingest process of a test file (useIngestProcess), once it is listening. */
export interface IngestProcess {
  readonly child: ServiceProcess;
  /** Its "ingest listening" log record: `address` (gRPC), and `ops` when OPS_ADDR asks for a port. */
  readonly listening: LogRecord;
}

/**
 * spawnIngest on the file's nats-server for the whole test file: started and listening before its
 * tests (and before the file's own beforeAll hooks registered after this call), killed if still
 * running after them. Read `child` and `listening` inside tests and hooks.
 */
export function useIngestProcess(
  nats: NatsFixture,
  adminToken: string,
  env: Record<string, string> = {},
): IngestProcess {
  let child: ServiceProcess | undefined;
  let listening: LogRecord | undefined;
  beforeAll(async () => {
    child = spawnIngest(nats.server.url, adminToken, env);
    listening = await child.waitFor("ingest listening", 60_000);
  }, 90_000);
  afterAll(async () => {
    killIfRunning(child?.proc);
    await child?.exited;
  });
  const started = () => {
    if (!child || !listening) throw new Error("useIngestProcess: use it inside a test or hook");
    return { child, listening };
  };
  return {
    get child() {
      return started().child;
    },
    get listening() {
      return started().listening;
    },
  };
}
