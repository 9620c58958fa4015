import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { isIPv6, type Socket } from "node:net";

/**
 * A connection waiting this long for request headers, or for the rest of a body, may be shed at
 * the cap: a real client sends within milliseconds; one just accepted has not had its chance.
 */
const SHED_AFTER_MS = 1_000;

/** Why the listener closed a connection itself (label `reason` of the metric). */
export type HttpCloseReason = "per_ip" | "shed" | "max_connections" | "timeout";

export interface HttpConnectionStats {
  /** TCP connections open now (counted by the guard). */
  open: number;
  /** Connections closed or refused by a limit, by reason. */
  closed: Record<HttpCloseReason, number>;
}

export interface ConnectionGuardLimits {
  maxConnections: number;
  maxConnectionsPerIp: number;
}

/**
 * Keeps slow or idle connections from holding every slot of `server`:
 * - one client address (an IPv6 /64) holds at most `maxConnectionsPerIp`; more are closed at once;
 * - at `maxConnections`, a newcomer is let in and the connection that has waited longest (at
 *   least SHED_AFTER_MS) for request headers or for the rest of a body is closed instead: a
 *   trickler, or an idle keep-alive. Only when none has is the newcomer refused.
 * Headers and body deadlines themselves are Node's headersTimeout and requestTimeout.
 *
 * Must be called right after createServer: it wraps Node's own connection listener so that a
 * refused socket never gets an HTTP parser.
 */
export function guardConnections(server: Server, limits: ConnectionGuardLimits): HttpConnectionStats {
  const stats: HttpConnectionStats = {
    open: 0,
    closed: { per_ip: 0, shed: 0, max_connections: 0, timeout: 0 },
  };
  const perIp = new Map<string, number>();
  const ipOf = new Map<Socket, string>();
  // Since when each waits; insertion order is waiting order (the first waited longest).
  const waitingHeaders = new Map<Socket, number>();
  const waitingBody = new Map<Socket, { req: IncomingMessage; since: number }>();

  const release = (socket: Socket) => {
    const ip = ipOf.get(socket);
    if (ip === undefined) return;
    ipOf.delete(socket);
    waitingHeaders.delete(socket);
    waitingBody.delete(socket);
    stats.open--;
    const left = (perIp.get(ip) ?? 1) - 1;
    if (left > 0) perIp.set(ip, left);
    else perIp.delete(ip);
  };

  const slowest = (): Socket | undefined => {
    let found: [Socket, number] | undefined = waitingHeaders.entries().next().value;
    for (const [socket, { req, since }] of waitingBody) {
      // A complete body is being answered: not waiting on the client any more.
      if (req.complete) {
        waitingBody.delete(socket);
        continue;
      }
      if (found === undefined || since < found[1]) found = [socket, since];
      break;
    }
    return found && performance.now() - found[1] >= SHED_AFTER_MS ? found[0] : undefined;
  };

  const admit = (socket: Socket): boolean => {
    const ip = clientKey(socket.remoteAddress);
    const held = perIp.get(ip) ?? 0;
    if (held >= limits.maxConnectionsPerIp) {
      stats.closed.per_ip++;
      return false;
    }
    if (stats.open >= limits.maxConnections) {
      const shed = slowest();
      if (shed === undefined) {
        stats.closed.max_connections++;
        return false;
      }
      stats.closed.shed++;
      // Released now, not at its 'close', so the next newcomer does not shed a second one.
      release(shed);
      shed.destroy();
    }
    perIp.set(ip, held + 1);
    ipOf.set(socket, ip);
    waitingHeaders.set(socket, performance.now());
    stats.open++;
    socket.once("close", () => release(socket));
    return true;
  };

  const internal = server.listeners("connection");
  if (internal.length !== 1) throw new Error("node:http changed: expected one 'connection' listener");
  const parse = internal[0] as (socket: Socket) => void;
  server.removeAllListeners("connection");
  server.on("connection", (socket: Socket) => {
    if (admit(socket)) parse.call(server, socket);
    else socket.destroy();
  });
  // A hard ceiling for sockets still closing after a shed; refused by net without any JS.
  server.maxConnections = limits.maxConnections + Math.max(16, Math.ceil(limits.maxConnections / 8));
  server.on("drop", () => stats.closed.max_connections++);

  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    if (!ipOf.has(socket)) return;
    waitingHeaders.delete(socket);
    if (!req.complete) waitingBody.set(socket, { req, since: performance.now() });
    // Answered: it waits for the next request's headers, at the back of the line.
    res.once("close", () => {
      waitingBody.delete(socket);
      if (ipOf.has(socket) && !socket.destroyed) waitingHeaders.set(socket, performance.now());
    });
  });
  return stats;
}

/** The address a per-client limit counts: IPv4 (IPv4-mapped too) as is, IPv6 by /64 (one host's usual share). */
export function clientKey(address: string | undefined): string {
  if (address === undefined) return "?";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (!isIPv6(address)) return address;
  const [head = "", tail] = address.split("%")[0]!.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
