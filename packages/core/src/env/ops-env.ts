import { ConfigError, envDuration, envInt } from "./read-env.js";

export interface OpsLimits {
  /** Open connections at most; more are closed at once. */
  maxConnections: number;
  /** A connection that sends nothing (before or between requests) for this long is closed. */
  idleTimeoutMs: number;
  /** A request must arrive complete (headers and body) within this long. */
  requestTimeoutMs: number;
}

type Env = Record<string, string | undefined>;

export const DEFAULT_OPS_LIMITS: OpsLimits = {
  maxConnections: 32,
  idleTimeoutMs: 10_000,
  requestTimeoutMs: 10_000,
};

/** The ops port's limits from OPS_* variables (README "Limits"). */
export function opsLimitsFromEnv(env: Env): OpsLimits {
  const d = DEFAULT_OPS_LIMITS;
  const limits = {
    maxConnections: envInt(env, "OPS_MAX_CONNECTIONS", d.maxConnections, 1),
    idleTimeoutMs: envDuration(env, "OPS_IDLE_TIMEOUT", d.idleTimeoutMs),
    requestTimeoutMs: envDuration(env, "OPS_REQUEST_TIMEOUT", d.requestTimeoutMs),
  };
  if (limits.idleTimeoutMs < 100) throw new ConfigError("OPS_IDLE_TIMEOUT must be at least 100ms");
  if (limits.requestTimeoutMs < 100) throw new ConfigError("OPS_REQUEST_TIMEOUT must be at least 100ms");
  return limits;
}
