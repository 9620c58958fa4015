import type { GrpcServerLimits } from "../grpc/listener.js";
import { ConfigError, envBool, envDuration, envInt } from "./read-env.js";

type Env = Record<string, string | undefined>;

export const DEFAULT_GRPC_LIMITS: GrpcServerLimits = {
  maxConcurrentStreams: 100,
  maxConnectionIdleMs: 5 * 60_000,
  maxConnectionAgeMs: 60 * 60_000,
  maxConnectionAgeGraceMs: 10 * 60_000,
  keepaliveTimeMs: 2 * 60 * 60_000,
  keepaliveTimeoutMs: 20_000,
  minPingIntervalMs: 5 * 60_000,
  permitKeepaliveWithoutCalls: false,
  maxPingStrikes: 2,
  maxConnections: 1000,
  handshakeTimeoutMs: 10_000,
};

/** The gRPC server limits from GRPC_* variables (README "Limits"). */
export function grpcLimitsFromEnv(env: Env): GrpcServerLimits {
  const d = DEFAULT_GRPC_LIMITS;
  const positive = (name: string, fallback: number) => {
    const ms = envDuration(env, name, fallback);
    if (ms <= 0) throw new ConfigError(`${name} must be a positive duration`);
    return ms;
  };
  return {
    maxConcurrentStreams: envInt(env, "GRPC_MAX_CONCURRENT_STREAMS", d.maxConcurrentStreams, 1),
    maxConnectionIdleMs: positive("GRPC_MAX_CONNECTION_IDLE", d.maxConnectionIdleMs),
    maxConnectionAgeMs: positive("GRPC_MAX_CONNECTION_AGE", d.maxConnectionAgeMs),
    maxConnectionAgeGraceMs: positive("GRPC_MAX_CONNECTION_AGE_GRACE", d.maxConnectionAgeGraceMs),
    keepaliveTimeMs: positive("GRPC_KEEPALIVE_TIME", d.keepaliveTimeMs),
    keepaliveTimeoutMs: positive("GRPC_KEEPALIVE_TIMEOUT", d.keepaliveTimeoutMs),
    minPingIntervalMs: positive("GRPC_MIN_PING_INTERVAL", d.minPingIntervalMs),
    permitKeepaliveWithoutCalls: envBool(
      env,
      "GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS",
      d.permitKeepaliveWithoutCalls,
    ),
    maxPingStrikes: envInt(env, "GRPC_MAX_PING_STRIKES", d.maxPingStrikes, 0),
    maxConnections: envInt(env, "GRPC_MAX_CONNECTIONS", d.maxConnections, 1),
    handshakeTimeoutMs: positive("GRPC_HANDSHAKE_TIMEOUT", d.handshakeTimeoutMs),
  };
}
