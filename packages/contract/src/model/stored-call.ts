import type { JsonObject } from "@bufbuild/protobuf";
/** The call types as stored (subjects, stream filters). */
export type EventType = "identify" | "track" | "page" | "screen" | "group" | "alias" | "delete";

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
