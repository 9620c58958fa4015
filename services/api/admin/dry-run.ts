import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  Code,
  consentDecision,
  type FieldViolation,
  HookpostError,
  isCallType,
  MAX_CALL_BYTES,
  type StoredCall,
  serverCall,
  toStoredCall,
  validateCall,
} from "@hookpost/contract";
import type { DryRunDestinationResponseSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { type DestinationRecord, prepareRequests, RenderError, renderBody } from "@hookpost/core";
import { callFromSegment, isObject } from "../http/segment-json.js";
import { throwIfInvalid } from "../invalid.js";

type DryRunAnswer = MessageInitShape<typeof DryRunDestinationResponseSchema>;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * The call of a dry run: one call as the Segment HTTP API takes it (`type` names it; "delete"
 * with a userId is a deletion notice), checked by the same rules, stamped as ingest would.
 */
export function dryRunCall(json: string, sourceId: string, now: Date): StoredCall {
  const field = "call_json";
  const bad = (description: string): never => throwIfInvalid([{ field, description }]) as never;
  if (json === "")
    bad('is required: a call as JSON, e.g. {"type":"track","userId":"u1","event":"Signed Up"}');
  if (Buffer.byteLength(json) > MAX_CALL_BYTES) bad(`is larger than ${MAX_CALL_BYTES} bytes`);
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    bad(`is not JSON: ${(err as Error).message}`);
  }
  if (!isObject(raw)) return bad("must be a JSON object");
  const type = raw.type;
  if (type === "delete") {
    if (typeof raw.userId !== "string" || raw.userId === "") bad("a delete call needs a userId");
    const at = now.toISOString();
    return serverCall("delete", { messageId: "dry-run", sourceId, userId: raw.userId as string }, at);
  }
  if (!isCallType(type)) {
    return bad(`"type" must be one of identify, track, page, screen, group, alias, delete`);
  }
  const violations: FieldViolation[] = [];
  const call = callFromSegment(raw, type, `${field}.`, {}, violations);
  for (const v of validateCall(call, "json", `${field}.`)) violations.push(v);
  throwIfInvalid(violations);
  return toStoredCall(call, { sourceId, receivedAt: now });
}

/**
 * What `dest` would send for `call`: the dispatcher's rendering path (core's prepareRequests),
 * after the routing rules the router applies first (consent). Nothing is sent.
 */
export async function dryRun(dest: DestinationRecord, call: StoredCall, now: Date): Promise<DryRunAnswer> {
  const consent = consentDecision(call, dest);
  if (!consent.deliver) return { filteredReason: consent.reason ?? "consent" };
  const ids = { messageId: call.messageId, sourceId: call.sourceId, destinationId: dest.id };
  try {
    const prepared = await prepareRequests(dest, encoder.encode(renderBody(call)), ids, now);
    if ("filtered" in prepared) return { filteredReason: prepared.filtered };
    return {
      requests: prepared.requests.map((r) => ({
        method: r.method,
        url: r.url,
        headers: r.headers,
        body: decoder.decode(r.body),
      })),
    };
  } catch (err) {
    if (err instanceof RenderError) return { error: `not sent: ${err.message}` };
    throw err;
  }
}

export function missingDryRunDestination(): HookpostError {
  return new HookpostError(Code.INVALID_ARGUMENT, "invalid request: destination_id or draft is required", [
    { field: "destination", description: "set destination_id (a stored destination) or draft" },
  ]);
}
