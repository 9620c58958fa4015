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
import type { ConfigStore, Logger } from "@hookpost/core";
import { extractTraceContext, toHookpostError } from "@hookpost/core";
import { sourceByWriteKey, unauthenticated, writeKeyFromBasic } from "../auth.js";
import type { CallIntake } from "../calls/intake.js";
import { throwIfInvalid } from "../invalid.js";
import type { IngestMetrics } from "../metrics.js";
import { readBody } from "./body.js";
import { errorAnswer, HttpStatusError } from "./http-error.js";
import { batchFromSegment, callFromSegment, copiedBytes, isObject } from "./segment-json.js";
import type { Mount } from "./server.js";

export interface SegmentApiDeps {
  store: ConfigStore;
  intake: CallIntake;
  log: Logger;
  metrics: IngestMetrics;
  /** HTTP_MAX_BODY_BYTES. */
  maxBodyBytes: number;
  /** MAX_BATCH_CALLS. */
  maxBatchCalls: number;
}

const BASIC_HINT = "send `Authorization: Basic base64(<write key>:)` or `writeKey` in the JSON body";
const ROUTES = new Set<string>([...CALL_TYPES, "batch", "import"]);
const utf8 = new TextDecoder("utf-8", { fatal: true });
const SUCCESS = JSON.stringify({ success: true });

/**
 * Segment's HTTP Tracking API on the ingest listener: `POST /v1/{identify,track,page,screen,group,
 * alias,batch,import}`. Same contract, same publish path and so the same stored calls and dedup
 * as gRPC; answers `200 {"success":true}` only once JetStream stored every call.
 */
export function segmentApi(deps: SegmentApiDeps): Mount {
  return async (req, res) => {
    const path = (req.url ?? "").split("?")[0]!;
    if (!path.startsWith("/v1/")) return false;
    const route = path.slice(4);
    if (!ROUTES.has(route)) return false;
    const started = performance.now();
    let code: Code = Code.OK;
    try {
      if (req.method !== "POST") {
        res.setHeader("Allow", "POST");
        throw new HttpStatusError(405, Code.UNIMPLEMENTED, `${path} takes POST requests only`);
      }
      await handle(deps, route, req);
      send(res, 200, {}, SUCCESS);
    } catch (err) {
      if ((err as NodeJS.ErrnoException)?.code === "ECONNRESET") {
        // The connection closed mid-body (the client, or a limit): nobody to answer, nothing wrong here.
        code = Code.CANCELLED;
        return true;
      }
      const known = toHookpostError(err);
      const herr = known ?? new HookpostError(Code.INTERNAL, "internal error", [], { cause: err });
      if (known === undefined) {
        deps.log.error({ transport: "http", path, err: (err as Error)?.message }, "internal error");
      }
      code = herr.code;
      const answer = errorAnswer(herr);
      // A body not read to its end cannot be followed by another request on this connection.
      if (!req.complete) answer.headers.Connection = "close";
      send(res, answer.status, answer.headers, JSON.stringify(answer.body));
    } finally {
      const ms = performance.now() - started;
      deps.metrics.callEnded("http", path, code, ms);
      deps.log.debug({ transport: "http", path, code: Code[code], ms: Math.round(ms * 10) / 10 }, "call");
    }
    return true;
  };
}

async function handle(deps: SegmentApiDeps, route: string, req: IncomingMessage): Promise<void> {
  // A key in the header is checked before the body is read (a stranger's body is not read).
  const header = req.headers.authorization;
  let source = header === undefined ? undefined : sourceByWriteKey(deps.store, basicWriteKey(header));

  const bytes = await readBody(req, deps.maxBodyBytes);
  const body = parse(bytes);
  const batch = route === "batch" || route === "import";
  // What the parsed body hides (duplicate keys, numbers that would change) and the sizes as stored.
  const scan = scanJsonText(bytes, batch ? "batch" : undefined);
  throwIfInvalid(scan.violations);
  if (source === undefined) {
    const key = body.writeKey;
    if (typeof key !== "string" || key === "") throw unauthenticated(`missing write key: ${BASIC_HINT}`);
    source = sourceByWriteKey(deps.store, key);
  }
  const violations: Violation[] = [];
  let calls: ContractCall[];
  if (batch) {
    calls = batchCalls(body, scan, deps.maxBatchCalls, violations);
  } else {
    const type = route as CallType;
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

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    ...headers,
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(body);
}
