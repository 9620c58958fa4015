import type { JsonObject } from "@bufbuild/protobuf";
import { CALL_STRING_FIELDS, CALL_TYPE_FIELDS, MAX_CALL_BYTES, objectProblem } from "@hookpost/contract";
import { AnalyticsError } from "./analytics-error.js";
import { type CallFields, CallTooLargeError, encodeFrame } from "./call-encoder.js";
import type { CallType, ParamsByType } from "./calls.js";
import { toJsonObject } from "./json.js";
import { clientTimestamp } from "./validate.js";

/**
 * Builds the wire form of a validated call and encodes it as a batch frame: the assigned message
 * id, the timestamp (the caller's, else now: when the event happened, not when a batch reached the
 * server) and `context.library` (ours wins: it names the library that actually sent the call).
 * Only the fields of the call's type are taken.
 */
export function encodeCall<T extends CallType>(
  type: T,
  params: ParamsByType[T],
  messageId: string,
  library: JsonObject,
  now: Date,
): Uint8Array {
  const p = params as Partial<Record<string, unknown>>;
  // Validated already: a number of milliseconds (sub-millisecond digits truncated).
  const ts = p.timestamp === undefined ? now : new Date(clientTimestamp(p.timestamp) as number);
  const fields: CallFields = {
    messageId,
    userId: p.userId as string | undefined,
    anonymousId: p.anonymousId as string | undefined,
    timestamp: ts,
    context: { ...(p.context ? json(p.context, "context") : {}), library },
    integrations: p.integrations as Record<string, boolean> | undefined,
  };
  for (const key of CALL_TYPE_FIELDS[type]) {
    fields[key] = isStringField(key) ? (p[key] as string | undefined) : json(p[key], key);
  }
  try {
    return encodeFrame(type, fields, MAX_CALL_BYTES);
  } catch (err) {
    if (!(err instanceof CallTooLargeError)) throw err;
    throw new AnalyticsError(
      "call_too_large",
      `${type} call is larger than ${MAX_CALL_BYTES} bytes (32 KiB) encoded`,
    );
  }
}

/** User data as JSON, checked against the contract's object rules (depth, finite numbers). */
function json(value: unknown, path: string): JsonObject | undefined {
  if (value === undefined) return undefined;
  const out = toJsonObject(value as object, path);
  const problem = objectProblem(out, path);
  if (problem) throw new AnalyticsError("invalid_call", `${path} ${problem}`, { field: path });
  return out;
}

function isStringField(key: string): boolean {
  return (CALL_STRING_FIELDS as readonly string[]).includes(key);
}
