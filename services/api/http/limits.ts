import { MAX_BATCH_BYTES } from "@hookpost/contract";

/** Resource limits of the HTTP listener (README variable table). */
export interface HttpLimits {
  /** HTTP_MAX_BODY_BYTES: a body, as sent and once gunzipped, is at most this large. */
  maxBodyBytes: number;
  /** HTTP_MAX_CONNECTIONS: open connections at a time; when full, the one waiting longest for headers is closed. */
  maxConnections: number;
  /** HTTP_MAX_CONNECTIONS_PER_IP: open connections of one client address (IPv6: one /64); more are closed at once. */
  maxConnectionsPerIp: number;
  /** HTTP_HEADERS_TIMEOUT: time to send the request headers. */
  headersTimeoutMs: number;
  /** HTTP_REQUEST_TIMEOUT: time to send a whole request (headers and body). */
  requestTimeoutMs: number;
  /** HTTP_KEEPALIVE_TIMEOUT: how long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_ADDR = "0.0.0.0:8080";

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  // The contract's batch limit: a larger body cannot be a valid request.
  maxBodyBytes: MAX_BATCH_BYTES,
  maxConnections: 1024,
  maxConnectionsPerIp: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};
