import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { listenError } from "../env/listen-error.js";
import { DEFAULT_OPS_LIMITS, type OpsLimits } from "../env/ops-env.js";

export type { OpsLimits };

export interface Readiness {
  ready: boolean;
  /** Why not ready (or what is ready), for people. */
  detail: Record<string, string | boolean | number>;
}

/** What one client may hold of the ops port (README "Limits"). */

export interface OpsServerOptions {
  /** `host:port`; port 0 picks a free one. */
  address: string;
  /** DEFAULT_OPS_LIMITS (packages/core/src/env/ops-env.ts) when absent. */
  limits?: OpsLimits;
  registry: Registry;
  /** The variable that set `address`, named when it cannot be opened (default `OPS_ADDR`). */
  variable?: string;
  /** Called on each /readyz. */
  readiness: () => Readiness | Promise<Readiness>;
}

export interface OpsServer {
  /** `host:port` actually bound. */
  readonly address: string;
  close(): Promise<void>;
}

export function splitHostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  if (i < 0) throw new Error(`expected host:port, got "${address}"`);
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  const port = Number(address.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad port in "${address}"`);
  return { host, port };
}

/**
 * The HTTP operations port of a service: /healthz (the process is alive), /readyz
 * (it can do its work: NATS connected, consumers in place) and Prometheus /metrics.
 */
export async function startOpsServer(options: OpsServerOptions): Promise<OpsServer> {
  const limits = options.limits ?? DEFAULT_OPS_LIMITS;
  const server: Server = createServer(
    {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.idleTimeoutMs,
      // Node checks the two timeouts above this often (default 30 s: too coarse for short limits).
      connectionsCheckingInterval: Math.max(50, Math.min(limits.requestTimeoutMs, limits.idleTimeoutMs) / 4),
    },
    (req, res) => {
      void (async () => {
        try {
          const path = (req.url ?? "/").split("?")[0];
          if (req.method !== "GET" && req.method !== "HEAD") {
            res.writeHead(405, { allow: "GET, HEAD" }).end();
          } else if (path === "/healthz") {
            res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
          } else if (path === "/readyz") {
            const r = await options.readiness();
            res
              .writeHead(r.ready ? 200 : 503, { "content-type": "application/json" })
              .end(JSON.stringify({ status: r.ready ? "ready" : "not ready", ...r.detail }));
          } else if (path === "/metrics") {
            const body = await options.registry.metrics();
            res.writeHead(200, { "content-type": options.registry.contentType }).end(body);
          } else {
            res
              .writeHead(404, { "content-type": "text/plain" })
              .end("not found: try /healthz, /readyz, /metrics\n");
          }
        } catch (err) {
          res.writeHead(500, { "content-type": "text/plain" }).end(`error: ${(err as Error).message}\n`);
        }
      })();
    },
  );
  server.maxConnections = limits.maxConnections;
  // A socket quiet for this long is destroyed, including one that never sent a request.
  server.setTimeout(limits.idleTimeoutMs);
  const { host, port } = splitHostPort(options.address);
  await new Promise<void>((resolve, reject) => {
    const failed = (err: Error) => reject(listenError(options.variable ?? "OPS_ADDR", options.address, err));
    server.once("error", failed);
    server.listen(port, host, () => {
      server.off("error", failed);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const shownHost = bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
  return {
    address: `${shownHost}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
