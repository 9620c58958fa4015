import type { JsonObject } from "@bufbuild/protobuf";
import { CALL_TYPES } from "../call.js";

/** The call types as stored (subjects, stream filters): the calls, and a user's deletion. */
export const EVENT_TYPES = [...CALL_TYPES, "delete"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export function isEventType(value: unknown): value is EventType {
  return typeof value === "string" && (EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * A call as ingest stores it on the EVENTS stream (JSON), and as the dispatcher reads it.
 * Keys the caller did not send are absent; `timestamp` is always set (the call's own
 * timestamp, else the receive time), both as ISO 8601 UTC with milliseconds.
 */
export interface StoredCall {
  type: EventType;
  messageId: string;
  sourceId: string;
  receivedAt: string;
  timestamp: string;
  userId?: string;
  anonymousId?: string;
  context?: JsonObject;
  integrations?: Record<string, boolean>;
  event?: string;
  name?: string;
  category?: string;
  properties?: JsonObject;
  traits?: JsonObject;
  groupId?: string;
  previousId?: string;
}
