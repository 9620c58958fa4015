import type { JsonObject } from "@bufbuild/protobuf";
import type { Timestamp } from "./timestamp.js";

export const CALL_TYPES = ["identify", "track", "page", "screen", "group", "alias"] as const;
export type CallType = (typeof CALL_TYPES)[number];

export function isCallType(value: unknown): value is CallType {
  return typeof value === "string" && (CALL_TYPES as readonly string[]).includes(value);
}

/** The text fields of a call (JSON names). */
export const CALL_STRING_FIELDS = [
  "messageId",
  "userId",
  "anonymousId",
  "event",
  "name",
  "category",
  "groupId",
  "previousId",
] as const;

/** The fields each call type carries beyond the ones every call has (JSON names). */
export const CALL_TYPE_FIELDS = {
  identify: ["traits"],
  track: ["event", "properties"],
  page: ["name", "category", "properties"],
  screen: ["name"],
  group: ["groupId", "traits"],
  alias: ["previousId"],
} as const satisfies Record<CallType, ReadonlyArray<keyof ContractCall>>;

/**
 * One analytics call as the contract sees it, whatever transport carried it. Strings are ""
 * when not sent (as in proto3); objects are undefined when not sent. Fields that do not belong
 * to the call's type are ignored by the rules and by the stored-call mapping.
 */
export interface ContractCall {
  type: CallType;
  /** "" when the caller sent none: ingest assigns one. */
  messageId: string;
  userId: string;
  anonymousId: string;
  timestamp?: Timestamp | undefined;
  context?: JsonObject | undefined;
  integrations?: Record<string, boolean> | undefined;
  /** track */
  event?: string | undefined;
  /** page, screen */
  name?: string | undefined;
  /** page */
  category?: string | undefined;
  /** track, page */
  properties?: JsonObject | undefined;
  /** identify, group */
  traits?: JsonObject | undefined;
  /** group */
  groupId?: string | undefined;
  /** alias */
  previousId?: string | undefined;
}
