import { type Http2Server, constants as h2, type ServerHttp2Session } from "node:http2";
import { createServer, type Server as NetServer, type Socket } from "node:net";
import type { Server, ServerCredentials } from "@grpc/grpc-js";
import { splitHostPort } from "../ops/ops-server.js";

/** Per-process limits of the gRPC server (README "Limits"). */
export interface GrpcServerLimits {
  /** Calls at once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** A connection without calls for this long is closed (GOAWAY). */
  maxConnectionIdleMs: number;
  /** A connection is asked to go away after this long (±10%), so that none is held forever ... */
  maxConnectionAgeMs: number;
  /** ... and closed this long after that, calls still running or not. */
  maxConnectionAgeGraceMs: number;
  /** The server pings a connection quiet for this long, and drops it without an answer in ... */
  keepaliveTimeMs: number;
  /** ... this long. */
  keepaliveTimeoutMs: number;
  /** Client pings closer together than this, while no call runs, count as strikes ... */
  minPingIntervalMs: number;
  /** ... (any ping without a call does, unless this is true) ... */
  permitKeepaliveWithoutCalls: boolean;
  /** ... and more strikes than this close the connection (GOAWAY ENHANCE_YOUR_CALM, too_many_pings). */
  maxPingStrikes: number;
  /** Open TCP connections at most; more are closed at once. */
  maxConnections: number;
  /** A connection that has not completed its TLS and HTTP/2 handshake after this long is closed. */
  handshakeTimeoutMs: number;
}

/** Without a call, C-core allows one ping per two hours; so do we. */
const PING_INTERVAL_WITHOUT_CALLS_MS = 2 * 60 * 60 * 1000;

/** grpc-js channel options for the limits it enforces itself (the rest is done here). */
export function grpcServerOptions(l: GrpcServerLimits): Record<string, number> {
  return {
    "grpc.max_concurrent_streams": l.maxConcurrentStreams,
    "grpc.max_connection_idle_ms": l.maxConnectionIdleMs,
    "grpc.max_connection_age_ms": l.maxConnectionAgeMs,
    "grpc.max_connection_age_grace_ms": l.maxConnectionAgeGraceMs,
    "grpc.keepalive_time_ms": l.keepaliveTimeMs,
    "grpc.keepalive_timeout_ms": l.keepaliveTimeoutMs,
    // Not enforced by grpc-js 1.14 (see enforcePings); passed on for versions that do.
    "grpc.http2.min_ping_interval_without_data_ms": l.minPingIntervalMs,
    "grpc.keepalive_permit_without_calls": l.permitKeepaliveWithoutCalls ? 1 : 0,
    "grpc.http2.max_ping_strikes": l.maxPingStrikes,
  };
}

export interface GrpcListenerStats {
  /** TCP connections open now. */
  open: number;
  /** Closed because the handshake did not complete in time. */
  handshakeTimeouts: number;
  /** Refused because maxConnections were open. */
  refused: number;
  /** Closed for too many pings. */
  pingStrikeouts: number;
}

export interface GrpcListener {
  readonly port: number;
  readonly stats: GrpcListenerStats;
  /** Stops accepting connections and closes those that never became gRPC connections. */
  close(): Promise<void>;
}

/**
 * Serves `server` on `address` through our own TCP listener, handing each socket to grpc-js
 * (its public connection injector). grpc-js alone keeps a socket that never speaks open for
 * ever and has no connection cap; here every socket must finish its TLS and HTTP/2 handshake
 * within `handshakeTimeoutMs`, at most `maxConnections` are open, and client pings are
 * policed (grpc-js 1.14 ignores min_ping_interval and ping strikes).
 */
export async function listenGrpc(
  server: Server,
  address: string,
  credentials: ServerCredentials,
  limits: GrpcServerLimits,
): Promise<GrpcListener> {
  const injector = server.createConnectionInjector(credentials);
  const pending = new Map<string, { socket: Socket; timer: NodeJS.Timeout }>();
  const stats: GrpcListenerStats = { open: 0, handshakeTimeouts: 0, refused: 0, pingStrikeouts: 0 };
  const keyOf = (s: { remoteAddress?: string | undefined; remotePort?: number | undefined }) =>
    `${s.remoteAddress}|${s.remotePort}`;

  for (const http2Server of injectorHttp2Servers(server)) {
    http2Server.on("session", (session: ServerHttp2Session) => {
      const key = keyOf(session.socket);
      // The client's SETTINGS frame follows its connection preface: the handshake is done.
      session.once("remoteSettings", () => {
        const p = pending.get(key);
        if (p) {
          clearTimeout(p.timer);
          pending.delete(key);
        }
      });
      enforcePings(session, limits, () => stats.pingStrikeouts++);
    });
  }

  const net: NetServer = createServer({ noDelay: true }, (socket) => {
    stats.open++;
    const key = keyOf(socket);
    const timer = setTimeout(() => {
      stats.handshakeTimeouts++;
      pending.delete(key);
      socket.destroy();
    }, limits.handshakeTimeoutMs);
    timer.unref();
    pending.set(key, { socket, timer });
    socket.once("close", () => {
      stats.open--;
      const p = pending.get(key);
      if (p?.socket === socket) {
        clearTimeout(p.timer);
        pending.delete(key);
      }
    });
    // A reset peer must not become an unhandled 'error'.
    socket.on("error", () => {});
    injector.injectConnection(socket);
  });
  net.maxConnections = limits.maxConnections;
  net.on("drop", () => stats.refused++);

  const { host, port } = splitHostPort(address);
  await new Promise<void>((resolve, reject) => {
    net.once("error", reject);
    net.listen(port, host, () => {
      net.off("error", reject);
      resolve();
    });
  });
  const bound = net.address();
  return {
    port: typeof bound === "object" && bound ? bound.port : port,
    stats,
    close: async () => {
      const closed = new Promise<void>((resolve) => net.close(() => resolve()));
      for (const { socket, timer } of pending.values()) {
        clearTimeout(timer);
        socket.destroy();
      }
      pending.clear();
      await closed;
    },
  };
}

/**
 * The HTTP/2 servers grpc-js made for its connection injectors. grpc-js has no public hook for
 * sessions, so this reads its (private) table; a grpc-js upgrade that changes it fails here,
 * at start, rather than silently dropping the ping policy.
 */
function injectorHttp2Servers(server: Server): Http2Server[] {
  const table = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(table instanceof Map)) throw new Error("grpc-js internals changed: Server.http2Servers is not a Map");
  return [...table.keys()] as Http2Server[];
}

/**
 * Ping policy of gRPC C-core: while no call runs, pings closer together than
 * minPingIntervalMs (two hours unless permitKeepaliveWithoutCalls) are strikes; a connection
 * with more than maxPingStrikes gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and is closed.
 * A new call clears the strikes.
 */
function enforcePings(session: ServerHttp2Session, limits: GrpcServerLimits, onStrikeout: () => void): void {
  let calls = 0;
  let strikes = 0;
  let lastPing: number | undefined;
  session.on("stream", (stream) => {
    calls++;
    strikes = 0;
    stream.once("close", () => calls--);
  });
  session.on("ping", () => {
    const now = Date.now();
    const min = limits.permitKeepaliveWithoutCalls
      ? limits.minPingIntervalMs
      : PING_INTERVAL_WITHOUT_CALLS_MS;
    if (calls === 0 && lastPing !== undefined && now - lastPing < min && ++strikes > limits.maxPingStrikes) {
      onStrikeout();
      session.goaway(h2.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from("too_many_pings"));
      session.destroy();
      return;
    }
    lastPing = now;
  });
}
