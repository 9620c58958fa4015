import type { OpsLimits, TopologySettings } from "@hookpost/core";
import {
  ConfigError,
  envDuration,
  envDurationOrOff,
  envInt,
  envList,
  envOptional,
  envString,
  envSwitch,
  opsLimitsFromEnv,
  topologyFromEnv,
} from "@hookpost/core";
import { AddressPolicy } from "./ssrf.js";

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

export interface DispatcherConfig {
  natsUrl: string;
  /** Per request, headers and body (WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** First retry delay; doubles per attempt (RETRY_BASE_DELAY). */
  retryBaseDelayMs: number;
  /** CIDRs the SSRF guard lets through (WEBHOOK_ALLOWED_CIDRS). */
  allowedCidrs: string[];
  /** Extra trusted CAs, PEM, added to the default roots (WEBHOOK_CA_FILE). */
  caFile?: string;
  logLevel: string;
  /** JetStream ack wait of the destination consumers; long attempts keep extending it (ACK_WAIT). */
  ackWaitMs: number;
  /** Concurrent deliveries per destination per replica (DELIVERY_CONCURRENCY). */
  deliveryConcurrency: number;
  /** Unacked deliveries (in flight or waiting for a retry) per destination (DELIVERY_MAX_ACK_PENDING). */
  maxAckPending: number;
  /** Concurrent events the router fans out per replica (ROUTER_CONCURRENCY). */
  routerConcurrency: number;
  /** Long-poll duration of a pull; shutdown waits for the open pulls to end (PULL_EXPIRES). */
  pullExpiresMs: number;
  /** How long shutdown lets in-flight deliveries finish before handing them back (SHUTDOWN_GRACE). */
  shutdownGraceMs: number;
  /** HTTP ops port for /healthz, /readyz, /metrics; undefined: none (OPS_ADDR, "off" disables). */
  opsAddr?: string;
  /** OPS_* limits of the ops port; DEFAULT_OPS_LIMITS when absent. */
  opsLimits?: OpsLimits;
  /** Pause a destination whose every attempt failed for this long; undefined: never (AUTO_DISABLE_AFTER). */
  autoDisableAfterMs?: number;
  /** Record every attempt on the ATTEMPTS stream (ATTEMPT_LOG, on|off). */
  attemptLog: boolean;
  /** Keep the request body in attempt records (ATTEMPT_LOG_BODIES, on|off). */
  attemptLogBodies: boolean;
  /** Stream settings; retryWindowMs (RETRY_WINDOW) and retryMaxDelayMs (RETRY_MAX_DELAY) live here. */
  topology: TopologySettings;
}

export function dispatcherConfigFromEnv(env: Env = process.env): DispatcherConfig {
  const topology = topologyFromEnv(env);
  const allowedCidrs = envList(env, "WEBHOOK_ALLOWED_CIDRS");
  try {
    new AddressPolicy(allowedCidrs);
  } catch (err) {
    throw new ConfigError(`WEBHOOK_ALLOWED_CIDRS: ${(err as Error).message}`);
  }
  const opsAddr = envString(env, "OPS_ADDR", "127.0.0.1:9091");
  const caFile = envOptional(env, "WEBHOOK_CA_FILE");
  const config: DispatcherConfig = {
    natsUrl: envString(env, "NATS_URL", "nats://127.0.0.1:4222"),
    webhookTimeoutMs: envInt(env, "WEBHOOK_TIMEOUT_MS", 5000, 1),
    retryBaseDelayMs: envDuration(env, "RETRY_BASE_DELAY", 1000),
    allowedCidrs,
    logLevel: envString(env, "LOG_LEVEL", "info"),
    ackWaitMs: envDuration(env, "ACK_WAIT", 30_000),
    deliveryConcurrency: envInt(env, "DELIVERY_CONCURRENCY", 16, 1),
    maxAckPending: envInt(env, "DELIVERY_MAX_ACK_PENDING", 1000, 1),
    routerConcurrency: envInt(env, "ROUTER_CONCURRENCY", 64, 1),
    pullExpiresMs: envDuration(env, "PULL_EXPIRES", 5000),
    shutdownGraceMs: envDuration(env, "SHUTDOWN_GRACE", 10_000),
    attemptLog: envSwitch(env, "ATTEMPT_LOG", true),
    attemptLogBodies: envSwitch(env, "ATTEMPT_LOG_BODIES", true),
    topology,
    opsLimits: opsLimitsFromEnv(env),
    ...optional("autoDisableAfterMs", envDurationOrOff(env, "AUTO_DISABLE_AFTER", 24 * 3600_000)),
    ...(caFile === undefined ? {} : { caFile }),
    ...(opsAddr === "off" ? {} : { opsAddr }),
  };
  if (!LOG_LEVELS.includes(config.logLevel))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got "${config.logLevel}"`);
  if (config.ackWaitMs < 1000) throw new ConfigError("ACK_WAIT must be at least 1s");
  if (config.pullExpiresMs < 1000) throw new ConfigError("PULL_EXPIRES must be at least 1s");
  if (config.retryBaseDelayMs < 1) throw new ConfigError("RETRY_BASE_DELAY must be positive");
  if (topology.retryMaxDelayMs < config.retryBaseDelayMs)
    throw new ConfigError("RETRY_MAX_DELAY must not be below RETRY_BASE_DELAY");
  return config;
}

function optional<K extends string, V>(key: K, value: V | undefined): { [k in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [k in K]?: V };
}

/** Defaults for everything but the NATS URL (tests, benchmarks, embedding). */
export function defaultDispatcherConfig(natsUrl: string, overrides: Partial<DispatcherConfig> = {}) {
  const base = dispatcherConfigFromEnv({ NATS_URL: natsUrl, OPS_ADDR: "off", LOG_LEVEL: "warn" });
  return { ...base, ...overrides } as DispatcherConfig;
}
