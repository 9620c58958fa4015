import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { listenError } from "@hookpost/core";
import { guardConnections, type HttpConnectionStats } from "./connection-guard.js";
import type { HttpLimits } from "./limits.js";

/**
 * A handler mounted on the HTTP listener: answers the request and returns true, or returns
 * false to let the next mount try (the last answer is a 404).
 */
export type Mount = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;

export interface HttpServerOptions {
  /** `host:port`; port 0 picks a free one. */
  address: string;
  limits: HttpLimits;
  /** Tried in order for each request (the Segment API, the console, …). */
  mounts: readonly Mount[];
  /** Unexpected failures of a mount (the client gets a 500). */
  onError?: (err: unknown) => void;
}

export interface HttpServer {
  /** `host:port` bound (the real port when 0 was asked). */
  readonly address: string;
  /** Open connections and those closed by a limit (read by the metrics). */
  readonly connections: HttpConnectionStats;
  /** Stops accepting, lets in-flight requests finish (at most `graceMs`), then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

const NOT_FOUND = JSON.stringify({ code: "NOT_FOUND", message: "no such path", violations: [] });

/**
 * Starts the ingest HTTP listener: keep-alive connections, caps on open connections (per client
 * address and in all, shedding the slowest when full: connection-guard.ts), and timeouts for
 * the headers and the whole request so slow clients are cut off. Every
 * outsider-controlled resource here has a limit (HttpLimits). Extra handlers are mounts.
 */
export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const { limits } = options;
  const server: Server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // How often the two timeouts above are checked (default 30 s would let them overrun).
      connectionsCheckingInterval: Math.max(250, Math.min(1_000, limits.headersTimeoutMs / 4)),
    },
    (req, res) => {
      void route(options, req, res);
    },
  );
  const connections = guardConnections(server, limits);
  // Never let a socket error (a client resetting mid-request) reach the process.
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    // Node's headersTimeout / requestTimeout ran out.
    const timedOut = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
    if (timedOut) connections.closed.timeout++;
    if (socket.writable && !socket.destroyed) {
      const status = timedOut ? "408 Request Timeout" : "400 Bad Request";
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    }
    socket.destroy();
  });

  const i = options.address.lastIndexOf(":");
  const host = options.address.slice(0, i);
  const port = Number(options.address.slice(i + 1));
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) => reject(listenError("HTTP_ADDR", options.address, err)));
    server.listen(port, host.replace(/^\[|\]$/g, ""), () => resolve());
  });
  const bound = server.address();
  const address = typeof bound === "object" && bound ? `${host}:${bound.port}` : options.address;

  let closed: Promise<void> | undefined;
  return {
    address,
    connections,
    close: (graceMs = 5_000) => {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), graceMs).unref();
      });
      return closed;
    },
  };
}

async function route(options: HttpServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    for (const mount of options.mounts) {
      if (await mount(req, res)) return;
    }
    res.writeHead(404, {
      "Content-Type": "application/json",
      "Content-Length": Buffer.byteLength(NOT_FOUND),
    });
    res.end(NOT_FOUND);
  } catch (err) {
    options.onError?.(err);
    if (!res.headersSent) {
      res.writeHead(500, { "Content-Type": "application/json", Connection: "close" });
      res.end(JSON.stringify({ code: "INTERNAL", message: "internal error", violations: [] }));
    } else res.destroy();
  }
}
