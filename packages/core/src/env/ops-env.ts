import type { Settings } from "../config/schema.js";

export interface OpsLimits {
  /** Open connections at most; more are closed at once. */
  maxConnections: number;
  /** A connection that sends nothing (before or between requests) for this long is closed. */
  idleTimeoutMs: number;
  /** A request must arrive complete (headers and body) within this long. */
  requestTimeoutMs: number;
}

export const DEFAULT_OPS_LIMITS: OpsLimits = {
  maxConnections: 32,
  idleTimeoutMs: 10_000,
  requestTimeoutMs: 10_000,
};

/** The ops port's limits from the OPS_* settings (docs/configuration.md). */
export function opsLimitsFrom(s: Settings): OpsLimits {
  return {
    maxConnections: s.OPS_MAX_CONNECTIONS,
    idleTimeoutMs: s.OPS_IDLE_TIMEOUT,
    requestTimeoutMs: s.OPS_REQUEST_TIMEOUT,
  };
}
