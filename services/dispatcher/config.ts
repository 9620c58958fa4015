import type { Keyring, OpsLimits, Settings, TopologySettings } from "@hookpost/core";
import { ConfigError, keyringFrom, loadSettings, opsLimitsFrom, setOnly, topologyFrom } from "@hookpost/core";
import { AddressPolicy } from "./ssrf.js";

type Env = Record<string, string | undefined>;

/** The default share of DEAD one source's dead letters may take (as SOURCE_MAX_PENDING_BYTES's). */
const DEAD_LETTER_SOURCE_SHARE = 16;

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
  /** Shared-lane partitions (DELIVERY_PARTITIONS). */
  deliveryPartitions: number;
  /** Requests in flight per replica, all destinations (DELIVERY_MAX_CONNECTIONS). */
  maxConnections: number;
  /** Consecutive failures that open a destination's breaker (BREAKER_FAILURES). */
  breakerFailures: number;
  /** An empty lane's consumer is deleted after this (LANE_IDLE). */
  laneIdleMs: number;
  /** How often lanes with parked calls are checked for a consumer (LANE_SWEEP_INTERVAL). */
  laneSweepMs: number;
  /** How often partitions are checked for deliveries their consumer lost (STRANDED_CHECK_INTERVAL). */
  strandedCheckMs: number;
  /** Ownership units of PER_USER delivery (ORDERED_PARTITIONS). */
  orderedPartitions: number;
  /** Concurrent events the router fans out per replica (ROUTER_CONCURRENCY). */
  routerConcurrency: number;
  /** The router's own first attempts to destinations that answer fast (DIRECT_DELIVERY). */
  directDelivery: boolean;
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
  /** What one source's destinations' dead letters may take on DEAD (SOURCE_MAX_DEAD_LETTER_BYTES). */
  deadLetterSourceMaxBytes: number;
  /** Keep the webhook body in dead letters (DEAD_LETTER_BODIES, on|off); default on. */
  deadLetterBodies?: boolean;
  /** Stream settings; retryWindowMs (RETRY_WINDOW) and retryMaxDelayMs (RETRY_MAX_DELAY) live here. */
  topology: TopologySettings;
  /** SECRETS_KEYS (or SECRETS_KEYS_FILE): open the secrets stored encrypted; absent: stored in plain text. */
  keyring?: Keyring;
  /** Operational webhooks (ALERT_*): what is watched, how often, and how events are debounced. */
  alerts: AlertSettings;
}

/** The ALERT_* settings (operator-webhooks/). */
export interface AlertSettings {
  checkMs: number;
  healthWindowMs: number;
  minAttempts: number;
  minIntervalMs: number;
  deadLetterWindowMs: number;
  behindLookups: number;
}

/** Reads the configuration from environment variables; throws ConfigError naming a bad one. */
export function dispatcherConfigFromEnv(env: Env): DispatcherConfig {
  return dispatcherConfigFrom(loadSettings("dispatcher", env));
}

/** The dispatcher configuration from its settings (packages/core/src/config/schema.ts). */
export function dispatcherConfigFrom(s: Settings): DispatcherConfig {
  const topology = topologyFrom(s);
  try {
    new AddressPolicy(s.WEBHOOK_ALLOWED_CIDRS);
  } catch (err) {
    throw new ConfigError(`WEBHOOK_ALLOWED_CIDRS: ${(err as Error).message}`);
  }
  if (topology.retryMaxDelayMs < s.RETRY_BASE_DELAY)
    throw new ConfigError("RETRY_MAX_DELAY must not be below RETRY_BASE_DELAY");
  const keyring = keyringFrom(s);
  return {
    natsUrl: s.NATS_URL ?? "nats://127.0.0.1:4222",
    webhookTimeoutMs: s.WEBHOOK_TIMEOUT,
    retryBaseDelayMs: s.RETRY_BASE_DELAY,
    allowedCidrs: s.WEBHOOK_ALLOWED_CIDRS,
    logLevel: s.LOG_LEVEL,
    ackWaitMs: s.ACK_WAIT,
    deliveryConcurrency: s.DELIVERY_CONCURRENCY,
    maxAckPending: s.DELIVERY_MAX_ACK_PENDING,
    deliveryPartitions: s.DELIVERY_PARTITIONS,
    maxConnections: s.DELIVERY_MAX_CONNECTIONS,
    breakerFailures: s.BREAKER_FAILURES,
    laneIdleMs: s.LANE_IDLE,
    laneSweepMs: s.LANE_SWEEP_INTERVAL,
    strandedCheckMs: s.STRANDED_CHECK_INTERVAL,
    orderedPartitions: s.ORDERED_PARTITIONS,
    routerConcurrency: s.ROUTER_CONCURRENCY,
    directDelivery: s.DIRECT_DELIVERY,
    pullExpiresMs: s.PULL_EXPIRES,
    shutdownGraceMs: s.SHUTDOWN_GRACE,
    attemptLog: s.ATTEMPT_LOG,
    attemptLogBodies: s.ATTEMPT_LOG_BODIES,
    deadLetterBodies: s.DEAD_LETTER_BODIES,
    deadLetterSourceMaxBytes:
      s.SOURCE_MAX_DEAD_LETTER_BYTES ?? Math.floor(topology.deadLetterMaxBytes / DEAD_LETTER_SOURCE_SHARE),
    topology,
    opsLimits: opsLimitsFrom(s),
    alerts: {
      checkMs: s.ALERT_CHECK_INTERVAL,
      healthWindowMs: s.ALERT_HEALTH_WINDOW,
      minAttempts: s.ALERT_MIN_ATTEMPTS,
      minIntervalMs: s.ALERT_MIN_INTERVAL,
      deadLetterWindowMs: s.ALERT_DEAD_LETTER_WINDOW,
      behindLookups: s.ALERT_BEHIND_LOOKUPS,
    },
    ...setOnly({
      autoDisableAfterMs: s.AUTO_DISABLE_AFTER,
      caFile: s.WEBHOOK_CA_FILE,
      opsAddr: s.OPS_ADDR,
      keyring,
    }),
  };
}

/** Defaults for everything but the NATS URL (tests, benchmarks, embedding). */
export function defaultDispatcherConfig(natsUrl: string, overrides: Partial<DispatcherConfig> = {}) {
  const base = dispatcherConfigFromEnv({ NATS_URL: natsUrl, OPS_ADDR: "off", LOG_LEVEL: "warn" });
  return { ...base, ...overrides } as DispatcherConfig;
}
