import { randomUUID } from "node:crypto";
import type { ContractCall } from "./call.js";
import type { EventType, StoredCall } from "./model/stored-call.js";

export interface Stamp {
  sourceId: string;
  /** Server receive time of the request (one per request, shared by a batch's calls). */
  receivedAt: Date;
}

/**
 * Stamps a validated call and turns it into the JSON record the dispatcher reads, the same
 * whichever transport carried it: message id generated when empty, receivedAt the server time,
 * timestamp the call's own else receivedAt. Keys the caller did not send (empty strings, unset
 * objects, an empty integrations map) are left out, never null.
 */
export function toStoredCall(call: ContractCall, stamp: Stamp): StoredCall {
  const receivedAt = isoOf(stamp.receivedAt);
  const out: StoredCall = {
    type: call.type,
    messageId: call.messageId === "" ? randomUUID() : call.messageId,
    sourceId: stamp.sourceId,
    receivedAt,
    timestamp: typeof call.timestamp === "number" ? new Date(call.timestamp).toISOString() : receivedAt,
  };
  if (call.userId !== "") out.userId = call.userId;
  if (call.anonymousId !== "") out.anonymousId = call.anonymousId;
  if (call.context !== undefined) out.context = call.context;
  if (call.integrations !== undefined && Object.keys(call.integrations).length > 0) {
    out.integrations = { ...call.integrations };
  }
  switch (call.type) {
    case "identify":
      if (call.traits !== undefined) out.traits = call.traits;
      break;
    case "track":
      if (call.event) out.event = call.event;
      if (call.properties !== undefined) out.properties = call.properties;
      break;
    case "page":
      if (call.name) out.name = call.name;
      if (call.category) out.category = call.category;
      if (call.properties !== undefined) out.properties = call.properties;
      break;
    case "screen":
      if (call.name) out.name = call.name;
      break;
    case "group":
      if (call.traits !== undefined) out.traits = call.traits;
      if (call.groupId) out.groupId = call.groupId;
      break;
    case "alias":
      if (call.previousId) out.previousId = call.previousId;
      break;
  }
  return out;
}

/** Who a call Hookpost makes itself is about, and its message id. */
export interface ServerCallIds {
  messageId: string;
  sourceId: string;
  userId: string;
}

/**
 * The record of a call Hookpost makes itself (a sync's identify, a user's deletion), shaped as
 * a sent call's: received and timed at `at` (ISO 8601 UTC), with the fields of its type.
 */
export function serverCall(
  type: EventType,
  ids: ServerCallIds,
  at: string,
  fields: Pick<StoredCall, "context" | "traits"> = {},
): StoredCall {
  const { messageId, sourceId, userId } = ids;
  return { type, messageId, sourceId, receivedAt: at, timestamp: at, userId, ...fields };
}

/** The calls of a batch share their receive time: rendered once. */
let lastMs = Number.NaN;
let lastIso = "";
function isoOf(date: Date): string {
  const ms = date.getTime();
  if (ms !== lastMs) {
    lastIso = date.toISOString();
    lastMs = ms;
  }
  return lastIso;
}
