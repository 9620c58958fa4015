import type { DescService, JsonReadOptions } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import {
  type Code as ConnectCode,
  ConnectError,
  type ServiceImpl as ConnectServiceImpl,
  createContextKey,
  type HandlerContext,
} from "@connectrpc/connect";
import { Metadata } from "@grpc/grpc-js";
import { Code, HookpostError } from "@hookpost/contract";
import { BadRequestSchema } from "@hookpost/contract/gen/google/rpc/error_details_pb";
import { toHookpostError } from "./domain-status.js";
import { LOST_MAP_KEY } from "./proto-map-keys.js";
import { type CallContext, internal, type ServeOptions, type ServiceImpl } from "./server.js";

/** The remote address of an HTTP request, handed to handlers as CallContext.peer. */
export const peerKey = createContextKey("unknown", { description: "remote address" });

/** Request headers a handler may read through CallContext.metadata (the rest stay out). */
const FORWARDED_HEADERS = ["authorization", "traceparent", "tracestate"];

/**
 * The same implementation grpc-js serves (packages/core/src/grpc/server.ts addService), as a Connect
 * service: handlers keep their CallContext (headers become grpc Metadata), and a HookpostError
 * becomes a ConnectError with the same code and, for field violations, a google.rpc.BadRequest
 * detail, so the browser reads the same errors as gRPC clients. Unary methods only; a missing
 * handler answers UNIMPLEMENTED.
 */
export function connectImpl<S extends GenServiceMethods>(
  service: GenService<S>,
  impl: ServiceImpl<S>,
  options: ServeOptions = {},
): ConnectServiceImpl<DescService> {
  const out: Record<string, (req: unknown, ctx: HandlerContext) => Promise<unknown>> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue;
    const name = `${service.name}/${method.name}`;
    const fn = (impl as Record<string, unknown>)[method.localName] as
      | ((req: unknown, ctx: CallContext) => Promise<unknown>)
      | undefined;
    out[method.localName] = async (req, hctx) => {
      const started = performance.now();
      let code: Code = Code.OK;
      try {
        if (!fn) throw new HookpostError(Code.UNIMPLEMENTED, `${name} is not implemented yet`);
        return await fn(req, callContext(name, hctx));
      } catch (err) {
        const herr = toHookpostError(err) ?? internal(name, err, options);
        code = herr.code;
        throw toConnectError(herr);
      } finally {
        options.onCallEnd?.(name, code, performance.now() - started);
      }
    };
  }
  return out as unknown as ConnectServiceImpl<DescService>;
}

function callContext(method: string, hctx: HandlerContext): CallContext {
  const metadata = new Metadata();
  for (const h of FORWARDED_HEADERS) {
    const v = hctx.requestHeader.get(h);
    if (v !== null) metadata.set(h, v);
  }
  return { method, metadata, peer: hctx.values.get(peerKey), signal: hctx.signal };
}

/** gRPC and Connect number their codes alike (1 CANCELLED … 16 UNAUTHENTICATED). */
export function toConnectError(err: HookpostError): ConnectError {
  const details =
    err.fieldViolations.length > 0
      ? [{ desc: BadRequestSchema, value: { fieldViolations: err.fieldViolations.map((v) => ({ ...v })) } }]
      : [];
  return new ConnectError(err.message, err.code as number as ConnectCode, undefined, details, err);
}

/**
 * How Connect reads JSON requests, so that it refuses what our gRPC decoder refuses
 * (server.ts) instead of changing it silently: text that is not UTF-8 (a default TextDecoder
 * would put U+FFFD in its place) and `__proto__` keys (a map entry so keyed sets the decoded
 * object's prototype, or nothing, and vanishes: proto-map-keys.ts). Both answer
 * INVALID_ARGUMENT before any handler runs. Pass as the router's `jsonOptions`: Connect hands
 * them to its JSON serialization, which reads `textDecoder` (connect 2.1's
 * JsonSerializationOptions; test/console/connect-input.test.ts checks that it still does).
 */
export const CONNECT_JSON_OPTIONS: Partial<JsonReadOptions> & {
  textDecoder: { decode(bytes?: Uint8Array): string };
} = {
  // Connect's default, kept: fields of a newer admin.proto are ignored by an older server.
  ignoreUnknownFields: true,
  textDecoder: { decode: strictJsonText },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

function strictJsonText(bytes?: Uint8Array): string {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw toConnectError(HookpostError.invalid([{ field: "body", description: "is not valid UTF-8" }]));
  }
  // Parsed whole (admin requests are small): the key may be written with escapes ("\u005f…").
  // Malformed JSON is left to Connect's own parse (its error names the position).
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return text;
  }
  const lost: string[] = [];
  protoKeys(json, "", lost);
  if (lost.length > 0) {
    throw toConnectError(
      HookpostError.invalid(
        lost.slice(0, 20).map((field) => ({
          field,
          description: `"${LOST_MAP_KEY}" is not accepted as a key (it cannot be stored faithfully)`,
        })),
      ),
    );
  }
  return text;
}

/** Paths (`destination.headers["__proto__"]`) of `__proto__` keys in parsed JSON. */
function protoKeys(value: unknown, path: string, out: string[]): void {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) protoKeys(v, `${path}[${i}]`, out);
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k === LOST_MAP_KEY) out.push(`${path}[${JSON.stringify(k)}]`);
      else protoKeys(v, path === "" ? k : `${path}.${k}`, out);
    }
  }
}
