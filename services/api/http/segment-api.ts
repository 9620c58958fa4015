import type { IncomingMessage, ServerResponse } from "node:http";
import {
  batchCountProblem,
  batchSizeViolations,
  CALL_TYPES,
  type CallType,
  Code,
  type ContractCall,
  callSizeProblem,
  HookpostError,
  isCallType,
  type JsonTextScan,
  MAX_CALL_BYTES,
  scanJsonText,
  type Violation,
  validateCall,
} from "@hookpost/contract";
import type { ConfigStore, Logger, SourceRecord } from "@hookpost/core";
import { extractTraceContext, toHookpostError } from "@hookpost/core";
import { sourceByWriteKey, unauthenticated, writeKeyFromBasic } from "../auth.js";
import type { CallIntake } from "../calls/intake.js";
import { throwIfInvalid } from "../invalid.js";
import type { IngestMetrics } from "../metrics.js";
import { readBody } from "./body.js";
import { answerPreflight, checkOrigin, corsHeaders } from "./cors.js";
import { errorAnswer, HttpStatusError } from "./http-error.js";
import { batchFromSegment, callFromSegment, copiedBytes, isObject } from "./segment-json.js";
import type { Mount } from "./server.js";
import {
  apiEndpoint,
  SETTINGS_LABEL,
  SETTINGS_MAX_AGE_S,
  SETTINGS_PATH,
  sdkSettings,
  settingsSource,
} from "./settings-path.js";

export interface SegmentApiDeps {
  store: ConfigStore;
  intake: CallIntake;
  log: Logger;
  metrics: IngestMetrics;
  /** HTTP_MAX_BODY_BYTES. */
  maxBodyBytes: number;
  /** MAX_BATCH_CALLS. */
  maxBatchCalls: number;
  /** HTTP_PUBLIC_URL: the SDKs' apiHost and protocol in the settings answer; absent: the request's Host. */
  publicUrl?: string | undefined;
}

const BASIC_HINT = "send `Authorization: Basic base64(<write key>:)` or `writeKey` in the JSON body";
type Route = CallType | "batch";
/**
 * Every collection path and what it is: Segment's long paths, `/v1/import` (the Go library's v1
 * batch path), and the short ones analytics.js and the mobile SDKs send to (`/v1/t`, …, `/v1/b`).
 * One table, one handler: a short path is its long path under another name.
 */
const ROUTES = new Map<string, Route>([
  ...CALL_TYPES.flatMap((type): [string, Route][] => [
    [type, type],
    [type.charAt(0), type],
  ]),
  ["batch", "batch"],
  ["import", "batch"],
  ["b", "batch"],
]);
const utf8 = new TextDecoder("utf-8", { fatal: true });
const SUCCESS = JSON.stringify({ success: true });

/**
 * Segment's HTTP Tracking API on the ingest listener: `POST /v1/{identify,track,page,screen,group,
 * alias,batch,import}` and the short paths `/v1/{i,t,p,s,g,a,b}`, plus the SDKs' settings path
 * `GET /v1/projects/<write key>/settings`, with CORS for browsers (cors.ts). Same contract, same
 * publish path and so the same stored calls and dedup as gRPC; answers `200 {"success":true}` only
 * once JetStream stored every call.
 */
export function segmentApi(deps: SegmentApiDeps): Mount {
  return async (req, res) => {
    const path = (req.url ?? "").split("?")[0]!;
    if (!path.startsWith("/v1/")) return false;
    const route = ROUTES.get(path.slice(4));
    const settingsKey = route === undefined ? SETTINGS_PATH.exec(path)?.[1] : undefined;
    if (route === undefined && settingsKey === undefined) return false;
    // The settings path carries a write key: metrics and logs name the path without it.
    const label = route === undefined ? SETTINGS_LABEL : path;
    const methods = route === undefined ? "GET" : "POST";
    if (req.method === "OPTIONS") {
      answerPreflight(req, res, methods);
      return true;
    }
    const started = performance.now();
    let code: Code = Code.OK;
    // Set once the request names a source, so that the answer's CORS follows its allowed_origins.
    const seen: { source?: SourceRecord } = {};
    try {
      if (req.method !== methods && !(methods === "GET" && req.method === "HEAD")) {
        res.setHeader("Allow", `${methods}, OPTIONS`);
        throw new HttpStatusError(405, Code.UNIMPLEMENTED, `${label} takes ${methods} requests only`);
      }
      if (route === undefined) {
        const { source, writeKey } = settingsSource(deps.store, settingsKey!);
        named(req, source, seen);
        const { apiHost, protocol } = apiEndpoint(req, deps.publicUrl);
        const body = JSON.stringify(sdkSettings(writeKey, apiHost, protocol));
        send(res, 200, { ...corsHeaders(req, source), "Cache-Control": SETTINGS_CACHE }, body, req.method);
        return true;
      }
      await handle(deps, route, req, seen);
      send(res, 200, corsHeaders(req, seen.source), SUCCESS);
    } catch (err) {
      if ((err as NodeJS.ErrnoException)?.code === "ECONNRESET") {
        // The connection closed mid-body (the client, or a limit): nobody to answer, nothing wrong here.
        code = Code.CANCELLED;
        return true;
      }
      const known = toHookpostError(err);
      const herr = known ?? new HookpostError(Code.INTERNAL, "internal error", [], { cause: err });
      if (known === undefined) {
        deps.log.error({ transport: "http", path: label, err: (err as Error)?.message }, "internal error");
      }
      code = herr.code;
      const answer = errorAnswer(herr);
      // A body not read to its end cannot be followed by another request on this connection.
      if (!req.complete) answer.headers.Connection = "close";
      // Errors are not cached (a 404 for a key created a moment later).
      if (route === undefined) answer.headers["Cache-Control"] = "no-store";
      const headers = { ...answer.headers, ...corsHeaders(req, seen.source) };
      send(res, answer.status, headers, JSON.stringify(answer.body), req.method);
    } finally {
      const ms = performance.now() - started;
      deps.metrics.callEnded("http", label, code, ms);
      deps.log.debug(
        { transport: "http", path: label, code: Code[code], ms: Math.round(ms * 10) / 10 },
        "call",
      );
    }
    return true;
  };
}

/** Browsers and shared caches may keep a settings answer this long. */
const SETTINGS_CACHE = `public, max-age=${SETTINGS_MAX_AGE_S}`;

/**
 * The request named `source`: its answer's CORS follows the source's allowed_origins from now on,
 * and a page on an origin it does not allow is refused (403) here, before anything is stored.
 */
function named(req: IncomingMessage, source: SourceRecord, seen: { source?: SourceRecord }): void {
  seen.source = source;
  checkOrigin(req, source);
}

async function handle(
  deps: SegmentApiDeps,
  route: Route,
  req: IncomingMessage,
  seen: { source?: SourceRecord },
): Promise<void> {
  // A key in the header is checked before the body is read (a stranger's body is not read), and
  // so is the page's origin: a call from a web site the source does not allow is never read.
  const header = req.headers.authorization;
  let source = header === undefined ? undefined : sourceByWriteKey(deps.store, basicWriteKey(header));
  if (source !== undefined) named(req, source, seen);

  const bytes = await readBody(req, deps.maxBodyBytes);
  const body = parse(bytes);
  const batch = route === "batch";
  // What the parsed body hides (duplicate keys, numbers that would change) and the sizes as stored.
  const scan = scanJsonText(bytes, batch ? "batch" : undefined);
  throwIfInvalid(scan.violations);
  if (source === undefined) {
    const key = body.writeKey;
    if (typeof key !== "string" || key === "") throw unauthenticated(`missing write key: ${BASIC_HINT}`);
    source = sourceByWriteKey(deps.store, key);
    named(req, source, seen);
  }
  const violations: Violation[] = [];
  let calls: ContractCall[];
  if (batch) {
    calls = batchCalls(body, scan, deps.maxBatchCalls, violations);
  } else {
    const type = route;
    if (scan.bytes > MAX_CALL_BYTES) {
      violations.push({
        field: "body",
        description: callSizeProblem(type, scan.bytes, MAX_CALL_BYTES, "as JSON"),
      });
    }
    const call = callFromSegment(body, type, "", {}, violations);
    violations.push(...validateCall(call, "json"));
    calls = [call];
  }
  throwIfInvalid(violations);
  // The caller's traceparent/tracestate go on to EVENTS and the webhook, as over gRPC.
  await deps.intake.store(
    source.id,
    calls,
    extractTraceContext((name) => req.headers[name]),
  );
}

function batchCalls(
  body: Record<string, unknown>,
  scan: JsonTextScan,
  maxCalls: number,
  out: Violation[],
): ContractCall[] {
  const count = Array.isArray(body.batch) ? body.batch.length : 0;
  const countProblem = Array.isArray(body.batch) ? batchCountProblem(count, maxCalls) : undefined;
  if (countProblem) {
    out.push({ field: "batch", description: countProblem });
    return [];
  }
  if (Array.isArray(body.batch)) {
    // Each call as stored: its JSON as it arrived (numbers as they will be written) plus the
    // batch-level fields copied into it. The scan read the one `batch` key (duplicates refused).
    const sizes = body.batch.map((item: unknown, i) => ({
      type: isObject(item) && isCallType(item.type) ? item.type : "unknown",
      bytes: scan.items?.[i] ?? Buffer.byteLength(JSON.stringify(item)),
    }));
    const copied = copiedBytes(body);
    out.push(...batchSizeViolations(sizes, copied, scan.bytes, "as JSON", (i) => `batch[${i}]`, "batch"));
  }
  return batchFromSegment(body, out) ?? [];
}

function basicWriteKey(header: string): string {
  const match = /^([A-Za-z]+) +(\S+) *$/.exec(header);
  if (!match || match[1]!.toLowerCase() !== "basic") {
    throw unauthenticated(`malformed Authorization: ${BASIC_HINT}`);
  }
  return writeKeyFromBasic(match[2]!, BASIC_HINT);
}

function parse(bytes: Buffer): Record<string, unknown> {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw HookpostError.invalid([{ field: "body", description: "is not valid UTF-8" }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw HookpostError.invalid([
      { field: "body", description: `is not valid JSON: ${(err as Error).message}` },
    ]);
  }
  if (!isObject(value))
    throw HookpostError.invalid([{ field: "body", description: "must be a JSON object" }]);
  return value;
}

function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string,
  method?: string,
): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    ...headers,
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(method === "HEAD" ? undefined : body);
}
