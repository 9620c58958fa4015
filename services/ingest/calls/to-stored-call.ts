import { randomUUID } from "node:crypto";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import type { Call } from "./call.js";

export interface Stamp {
  sourceId: string;
  /** Server receive time of the request (one per request, shared by a batch's calls). */
  receivedAt: Date;
}

/**
 * Stamps a validated call and turns it into the JSON record the dispatcher reads:
 * message id generated when empty, receivedAt the server time, timestamp the call's own
 * else receivedAt. Keys the caller did not send (empty strings, unset objects, an empty
 * integrations map) are left out, never null.
 */
export function toStoredCall(call: Call, stamp: Stamp): StoredCall {
  const c = call.value;
  const receivedAt = stamp.receivedAt.toISOString();
  const out: StoredCall = {
    type: call.case,
    messageId: c.messageId === "" ? randomUUID() : c.messageId,
    sourceId: stamp.sourceId,
    receivedAt,
    timestamp: c.timestamp ? timestampDate(c.timestamp).toISOString() : receivedAt,
  };
  if (c.userId !== "") out.userId = c.userId;
  if (c.anonymousId !== "") out.anonymousId = c.anonymousId;
  if (c.context !== undefined) out.context = c.context;
  if (Object.keys(c.integrations).length > 0) out.integrations = { ...c.integrations };
  switch (call.case) {
    case "identify":
      if (call.value.traits !== undefined) out.traits = call.value.traits;
      break;
    case "track":
      if (call.value.event !== "") out.event = call.value.event;
      if (call.value.properties !== undefined) out.properties = call.value.properties;
      break;
    case "page":
      if (call.value.name !== "") out.name = call.value.name;
      if (call.value.category !== "") out.category = call.value.category;
      if (call.value.properties !== undefined) out.properties = call.value.properties;
      break;
    case "screen":
      if (call.value.name !== "") out.name = call.value.name;
      break;
    case "group":
      if (call.value.traits !== undefined) out.traits = call.value.traits;
      if (call.value.groupId !== "") out.groupId = call.value.groupId;
      break;
    case "alias":
      if (call.value.previousId !== "") out.previousId = call.value.previousId;
      break;
  }
  return out;
}
