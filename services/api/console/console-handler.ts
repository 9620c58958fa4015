import type { IncomingMessage, ServerResponse } from "node:http";
import type { DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, createContextValues } from "@connectrpc/connect";
import {
  createAsyncIterable,
  readAllBytes,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import { HookpostError } from "@hookpost/contract";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { ServeOptions, ServiceImpl } from "@hookpost/core";
import { CONNECT_JSON_OPTIONS, connectImpl, decodeRequest, peerKey, toConnectError } from "@hookpost/core";
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
  const connect = connectAdapter(deps);
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
      await connect(req, res, path);
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

const BINARY = /^\s*application\/proto\s*(?:;|$)/i;

/**
 * AdminService over the Connect protocol (HTTP/1.1 from browsers and scripts; gRPC has its own
 * port), as connect-node's adapter serves it, with one step more: the Connect library decodes a
 * request before any handler runs, outside our gRPC decoder, so it would answer 500 ("parse
 * binary") for bytes that are not the message, to anyone, and drop `__proto__` map keys. A binary
 * request is decoded by the gRPC decoder first (decodeRequest: INVALID_ARGUMENT for both); JSON
 * is read with CONNECT_JSON_OPTIONS, which refuse the same.
 */
function connectAdapter(
  deps: ConsoleHandlerDeps,
): (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void> {
  const router = createConnectRouter({
    grpc: false,
    grpcWeb: false,
    readMaxBytes: MAX_REQUEST_BYTES,
    jsonOptions: CONNECT_JSON_OPTIONS,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  router.service(AdminService, connectImpl(AdminService, deps.admin, deps.serveOptions));
  const rpcs = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return async (req, res, path) => {
    const rpc = rpcs.get(path);
    if (!rpc) {
      res.writeHead(404).end();
      return;
    }
    // Done when the response is: connect-node's writer waits for an "end" a plain ServerResponse
    // never emits, so its promise is not awaited (as in its own adapter).
    const closed = new Promise<void>((done) => res.once("close", done));
    const contextValues = createContextValues().set(peerKey, req.socket?.remoteAddress ?? "unknown");
    const uReq = universalRequestFromNodeRequest(req, res, undefined, contextValues);
    let uRes: UniversalServerResponse;
    try {
      if (req.method === "POST" && BINARY.test(req.headers["content-type"] ?? "")) {
        await checkBinary(uReq, rpc.method.input);
      }
      uRes = await rpc(uReq);
    } catch (err) {
      uRes = errorResponse(err);
    }
    // A write error means the client went away: nobody to answer.
    universalResponseToNodeResponse(uRes, res).catch(() => res.destroy());
    await closed;
  };
}

/**
 * Reads a binary request's body (at most MAX_REQUEST_BYTES, as the router would) and decodes it
 * as gRPC does; then hands the same bytes on to the router. An encoding Connect does not know is
 * left to the router to refuse.
 */
async function checkBinary(uReq: UniversalServerRequest, input: DescMessage): Promise<void> {
  const body = uReq.body as AsyncIterable<Uint8Array>;
  const bytes = await readAllBytes(body, MAX_REQUEST_BYTES, uReq.header.get("content-length"));
  const encoding = (uReq.header.get("content-encoding") ?? "identity").trim().toLowerCase();
  const codec = [compressionGzip, compressionBrotli].find((c) => c.name === encoding);
  const plain =
    encoding === "identity" ? bytes : codec ? await codec.decompress(bytes, MAX_REQUEST_BYTES) : undefined;
  if (plain !== undefined) decodeRequest(input, plain);
  uReq.body = createAsyncIterable([bytes]);
}

/** A refusal before the router (decoding, size) as the Connect protocol answers errors. */
function errorResponse(err: unknown): UniversalServerResponse {
  const error =
    err instanceof HookpostError ? toConnectError(err) : ConnectError.from(err, Code.InvalidArgument);
  return {
    status: codeToHttpStatus(error.code),
    header: new Headers({ "content-type": "application/json" }),
    body: createAsyncIterable([errorToJsonBytes(error, {})]),
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
