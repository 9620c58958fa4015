import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ConfigError } from "../../../lib/env/read-env.js";
import type { Logger } from "../../../lib/log/logger.js";
import { splitHostPort } from "../../../lib/ops/ops-server.js";

/** A handler that serves some paths and resolves false for the others. */
export type Mount = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

export interface HttpListener {
  /** `host:port` actually bound. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * A minimal HTTP listener on HTTP_ADDR trying each mount in turn (404 when none serves the
 * path). Stand-in until the ingest's HTTP API listener exists, which takes the same mounts.
 */
export async function startHttpListener(
  address: string,
  mounts: Mount[],
  log: Logger,
): Promise<HttpListener> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      try {
        for (const mount of mounts) if (await mount(req, res)) return;
        res.writeHead(404, { "content-type": "text/plain" }).end("not found: the console is at /console/\n");
      } catch (err) {
        log.error({ err: (err as Error).message, path: req.url?.split("?")[0] }, "HTTP request failed");
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end();
      }
    })();
  });
  const { host, port } = splitHostPort(address);
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) =>
      reject(new ConfigError(`HTTP_ADDR ${address}: cannot listen: ${err.message}`)),
    );
    server.listen(port, host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return {
    address: `${address.slice(0, address.lastIndexOf(":"))}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
