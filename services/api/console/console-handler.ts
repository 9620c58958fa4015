import type { IncomingMessage, ServerResponse } from "node:http";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { ServeOptions, ServiceImpl } from "@hookpost/core";
import { connectImpl, peerKey } from "@hookpost/core";
import type { AdminMethods } from "../admin/sources.js";
import { defaultConsoleDir, loadStaticFiles, type StaticFile } from "./static-files.js";

export interface ConsoleHandlerDeps {
  /** The AdminService implementation gRPC serves (services/api/admin/admin-service.ts). */
  admin: ServiceImpl<AdminMethods>;
  /** Metrics and logging of calls, as for gRPC. */
  serveOptions?: ServeOptions;
  /** The built console (default: dist/console of this checkout). */
  consoleDir?: string;
  /** CONSOLE_FRAME_ANCESTORS: sites that may frame the console (default: none). */
  frameAncestors?: readonly string[];
}

/** Admin requests are small; anything bigger is refused before it is read. */
const MAX_REQUEST_BYTES = 1 << 20;
const SERVICE_PREFIX = `/${AdminService.typeName}/`;
const CONSOLE_PREFIX = "/console/";

/**
 * The console never loads anything from elsewhere and runs no inline script or style; `data:`
 * images are Pico CSS's icons. It may be framed only by the sites CONSOLE_FRAME_ANCESTORS lists
 * (a portal link embedded in a customer app), by none when it lists none; X-Frame-Options DENY
 * then also covers browsers without CSP frame-ancestors. A listing replaces X-Frame-Options, whose
 * ALLOW-FROM browsers never implemented.
 */
export function securityHeaders(frameAncestors: readonly string[]): Record<string, string> {
  const ancestors = frameAncestors.length === 0 ? "'none'" : frameAncestors.join(" ");
  return {
    "content-security-policy":
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
      `connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors ${ancestors}`,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    ...(frameAncestors.length === 0 ? { "x-frame-options": "DENY" } : {}),
  };
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Hookpost console</title>
<p>The console is not built. Run <code>npm run build</code>, then reload this page.</p>`;

/**
 * One HTTP handler for the web console: AdminService over the Connect protocol (the same
 * handlers as gRPC, same admin-token auth) under `/hookpost.v1.AdminService/`, and the static
 * app under `/console/`. Resolves false for any other path, so it can be mounted beside other
 * routes on one listener.
 */
export function createConsoleHandler(
  deps: ConsoleHandlerDeps,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const connect = connectNodeAdapter({
    routes: (router) =>
      router.service(AdminService, connectImpl(AdminService, deps.admin, deps.serveOptions)),
    // HTTP/1.1 from browsers and scripts: the Connect protocol only (gRPC has its own port).
    grpc: false,
    grpcWeb: false,
    readMaxBytes: MAX_REQUEST_BYTES,
    contextValues: (req) => createContextValues().set(peerKey, req.socket?.remoteAddress ?? "unknown"),
  });
  const dir = deps.consoleDir ?? defaultConsoleDir();
  const headers = securityHeaders(deps.frameAncestors ?? []);
  // Loaded on first use and kept; retried while the console is not built yet.
  let files: Promise<Map<string, StaticFile> | undefined> | undefined;
  const staticFiles = async () => {
    files ??= loadStaticFiles(dir);
    const loaded = await files;
    if (!loaded) files = undefined;
    return loaded;
  };

  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (path.startsWith(SERVICE_PREFIX)) {
      await new Promise<void>((done) => {
        res.once("close", done);
        connect(req, res);
      });
      return true;
    }
    if (path === "/console") {
      res.writeHead(301, { location: CONSOLE_PREFIX }).end();
      return true;
    }
    if (!path.startsWith(CONSOLE_PREFIX)) return false;
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return true;
    }
    const all = await staticFiles();
    if (!all) {
      res.writeHead(503, { ...headers, "content-type": "text/html; charset=utf-8" }).end(NOT_BUILT);
      return true;
    }
    let rel: string;
    try {
      rel = decodeURIComponent(path.slice(CONSOLE_PREFIX.length));
    } catch {
      res.writeHead(400, { "content-type": "text/plain" }).end("malformed path\n");
      return true;
    }
    // Client-side routes (no file of that name outside assets/) get the app itself.
    const file = all.get(rel) ?? (rel.startsWith("assets/") ? undefined : all.get("index.html"));
    if (!file) {
      res.writeHead(404, { ...headers, "content-type": "text/plain" }).end("not found\n");
      return true;
    }
    sendFile(req, res, file, headers);
    return true;
  };
}

function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  file: StaticFile,
  headers: Record<string, string>,
): void {
  const gzip = file.gzip !== undefined && /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""));
  const body = gzip ? file.gzip! : file.body;
  res.writeHead(200, {
    ...headers,
    "content-type": file.type,
    "content-length": body.length,
    "cache-control": file.immutable ? "public, max-age=31536000, immutable" : "no-cache",
    vary: "accept-encoding",
    ...(gzip ? { "content-encoding": "gzip" } : {}),
  });
  res.end(req.method === "HEAD" ? undefined : body);
}
