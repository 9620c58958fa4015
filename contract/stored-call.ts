import { randomUUID } from "node:crypto";
import type { StoredCall } from "../lib/model/stored-call.js";
import type { ContractCall } from "./call.js";

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
  const receivedAt = stamp.receivedAt.toISOString();
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
  const str = (key: "event" | "name" | "category" | "groupId" | "previousId") => {
    const v = call[key];
    if (v) out[key] = v;
  };
  switch (call.type) {
    case "identify":
      if (call.traits !== undefined) out.traits = call.traits;
      break;
    case "track":
      str("event");
      if (call.properties !== undefined) out.properties = call.properties;
      break;
    case "page":
      str("name");
      str("category");
      if (call.properties !== undefined) out.properties = call.properties;
      break;
    case "screen":
      str("name");
      break;
    case "group":
      if (call.traits !== undefined) out.traits = call.traits;
      str("groupId");
      break;
    case "alias":
      str("previousId");
      break;
  }
  return out;
}
