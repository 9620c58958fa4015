import type { JsonObject } from "@bufbuild/protobuf";
import {
  type CallType,
  type ContractCall,
  InvalidTimestamp,
  isCallType,
  parseIsoTimestamp,
  protoKeyProblem,
  type Timestamp,
  type Violation,
  validateCall,
} from "@hookpost/contract";

/** Batch-level fields merged into each call of a batch (Segment's `context`, `integrations`). */
export interface Inherited {
  context?: JsonObject | undefined;
  integrations?: Record<string, boolean> | undefined;
}

type Bag = Record<string, unknown>;

export function isObject(v: unknown): v is Bag {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * Reads one call of Segment's JSON (camelCase, `null` = not sent, unknown keys ignored) into
 * contract form, collecting type errors as violations named as the client sent them
 * (`batch[3].userId`). The contract's rules are checked afterwards on the result.
 */
export function callFromSegment(
  raw: Bag,
  type: CallType,
  prefix: string,
  inherited: Inherited,
  out: Violation[],
): ContractCall {
  const bad = (field: string, description: string) => out.push({ field: prefix + field, description });
  const str = (field: string): string => {
    const v = raw[field];
    if (v === undefined || v === null) return "";
    if (typeof v === "string") return v;
    bad(field, `must be a string, got ${describe(v)}`);
    return "";
  };
  const obj = (field: string): JsonObject | undefined => {
    const v = raw[field];
    if (v === undefined || v === null) return undefined;
    if (isObject(v)) return v as JsonObject;
    bad(field, `must be an object, got ${describe(v)}`);
    return undefined;
  };
  const call: ContractCall = {
    type,
    messageId: str("messageId"),
    userId: str("userId"),
    anonymousId: str("anonymousId"),
    timestamp: timestamp(raw.timestamp),
    context: merge(inherited.context, obj("context")),
    integrations: merge(inherited.integrations, integrations(raw.integrations, bad)),
  };
  if (type === "track") {
    call.event = str("event");
    call.properties = obj("properties");
  } else if (type === "page") {
    call.name = str("name");
    call.category = str("category");
    call.properties = obj("properties");
  } else if (type === "screen") {
    call.name = str("name");
  } else if (type === "identify" || type === "group") {
    call.traits = obj("traits");
    if (type === "group") call.groupId = str("groupId");
  } else if (type === "alias") {
    call.previousId = str("previousId");
  }
  return call;
}

/**
 * The calls of a `/v1/batch` (or `/v1/import`) body, with batch-level context and integrations
 * merged in, checked against the contract's rules (violations go to `out`).
 */
export function batchFromSegment(body: Bag, out: Violation[]): ContractCall[] | undefined {
  const batch = body.batch;
  if (!Array.isArray(batch)) {
    out.push({ field: "batch", description: `must be an array of calls, got ${describe(batch)}` });
    return undefined;
  }
  const inherited: Inherited = {};
  if (isObject(body.context)) inherited.context = body.context as JsonObject;
  else if (body.context != null) out.push({ field: "context", description: "must be an object" });
  inherited.integrations = integrations(body.integrations, (field, description) =>
    out.push({ field, description }),
  );
  const calls: ContractCall[] = [];
  batch.forEach((item, i) => {
    const prefix = `batch[${i}].`;
    if (!isObject(item)) {
      out.push({ field: `batch[${i}]`, description: `must be an object, got ${describe(item)}` });
      return;
    }
    if (!isCallType(item.type)) {
      out.push({
        field: `${prefix}type`,
        description: `must be one of identify, track, page, screen, group, alias; got ${describe(item.type)}`,
      });
      return;
    }
    const call = callFromSegment(item, item.type, prefix, inherited, out);
    out.push(...validateCall(call, "json", prefix));
    calls.push(call);
  });
  return calls;
}

function timestamp(v: unknown): Timestamp | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === "string") return parseIsoTimestamp(v);
  return new InvalidTimestamp(`must be an ISO 8601 string, got ${describe(v)}`);
}

/**
 * Segment's integrations: destination name to true/false, or to an object of per-destination
 * options, which means "on" (options are not used by webhooks).
 */
function integrations(
  v: unknown,
  bad: (field: string, description: string) => void,
): Record<string, boolean> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) {
    bad("integrations", `must be an object, got ${describe(v)}`);
    return undefined;
  }
  const out: Record<string, boolean> = {};
  for (const [k, value] of Object.entries(v)) {
    if (k === "__proto__") bad("integrations", protoKeyProblem("integrations.__proto__"));
    else if (typeof value === "boolean") out[k] = value;
    else if (isObject(value)) out[k] = true;
    else bad(`integrations.${k}`, `must be true, false or an object of options, got ${describe(value)}`);
  }
  return out;
}

/**
 * The bytes a batch's `context` and `integrations` add to each call they are copied into, as
 * stored (their JSON; a call's own keys may replace some, never add to them).
 */
export function copiedBytes(body: Bag): number {
  let n = 0;
  if (isObject(body.context)) n += Buffer.byteLength(JSON.stringify(body.context));
  if (isObject(body.integrations)) n += Buffer.byteLength(JSON.stringify(body.integrations));
  return n;
}

/** The call's own keys win over the batch's (a shallow merge, as Segment does). */
function merge<T extends object>(batch: T | undefined, own: T | undefined): T | undefined {
  if (batch === undefined) return own;
  if (own === undefined) return { ...batch };
  return { ...batch, ...own };
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (v === undefined) return "nothing";
  return typeof v === "string" ? "a string" : `a ${typeof v}`;
}
