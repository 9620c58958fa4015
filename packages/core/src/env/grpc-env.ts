import type { Settings } from "../config/schema.js";
import type { GrpcServerLimits } from "../grpc/listener.js";

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

/** The gRPC server limits from the GRPC_* settings (docs/configuration.md). */
export function grpcLimitsFrom(s: Settings): GrpcServerLimits {
  return {
    maxConcurrentStreams: s.GRPC_MAX_CONCURRENT_STREAMS,
    maxConnectionIdleMs: s.GRPC_MAX_CONNECTION_IDLE,
    maxConnectionAgeMs: s.GRPC_MAX_CONNECTION_AGE,
    maxConnectionAgeGraceMs: s.GRPC_MAX_CONNECTION_AGE_GRACE,
    keepaliveTimeMs: s.GRPC_KEEPALIVE_TIME,
    keepaliveTimeoutMs: s.GRPC_KEEPALIVE_TIMEOUT,
    minPingIntervalMs: s.GRPC_MIN_PING_INTERVAL,
    permitKeepaliveWithoutCalls: s.GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS,
    maxPingStrikes: s.GRPC_MAX_PING_STRIKES,
    maxConnections: s.GRPC_MAX_CONNECTIONS,
    handshakeTimeoutMs: s.GRPC_HANDSHAKE_TIMEOUT,
  };
}
