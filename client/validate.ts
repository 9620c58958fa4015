import { AnalyticsError } from "./analytics-error.js";
import type { CallType } from "./calls.js";

export const MAX_MESSAGE_ID_LENGTH = 100;

const STRING_FIELDS = [
  "messageId",
  "userId",
  "anonymousId",
  "event",
  "name",
  "category",
  "groupId",
  "previousId",
] as const;
const OBJECT_FIELDS = ["context", "traits", "properties", "integrations"] as const;

/**
 * The rules of the ingest contract (SPEC section 3), checked at enqueue so a bad call throws where
 * it was made instead of failing a whole batch, all-or-nothing, on the server later.
 */
export function validateCall(type: CallType, params: unknown): void {
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    throw invalid(type, "", `${type} needs an object of fields`);
  }
  const p = params as Record<string, unknown>;
  for (const f of STRING_FIELDS) {
    if (p[f] !== undefined && typeof p[f] !== "string")
      throw invalid(type, f, `${type}.${f} must be a string`);
  }
  for (const f of OBJECT_FIELDS) {
    const v = p[f];
    if (v !== undefined && (v === null || typeof v !== "object" || Array.isArray(v))) {
      throw invalid(type, f, `${type}.${f} must be an object`);
    }
  }
  if (p.integrations !== undefined) {
    for (const [k, v] of Object.entries(p.integrations as object)) {
      if (typeof v !== "boolean") {
        throw invalid(type, `integrations.${k}`, `${type}.integrations.${k} must be true or false`);
      }
    }
  }
  const messageId = p.messageId as string | undefined;
  if (messageId !== undefined && messageId.length > MAX_MESSAGE_ID_LENGTH) {
    throw invalid(type, "messageId", `${type}.messageId is longer than ${MAX_MESSAGE_ID_LENGTH} characters`);
  }
  if (p.timestamp !== undefined) checkTimestamp(type, p.timestamp);

  const has = (f: string) => typeof p[f] === "string" && p[f] !== "";
  if (type === "alias") {
    if (!has("userId")) throw invalid(type, "userId", "alias needs a userId");
    if (!has("previousId")) throw invalid(type, "previousId", "alias needs a previousId");
    return;
  }
  if (!has("userId") && !has("anonymousId")) {
    throw invalid(type, "userId", `${type} needs a userId or an anonymousId`);
  }
  if (type === "track" && !has("event")) throw invalid(type, "event", "track needs an event");
  if (type === "group" && !has("groupId")) throw invalid(type, "groupId", "group needs a groupId");
}

function checkTimestamp(type: CallType, ts: unknown): void {
  const ms = ts instanceof Date ? ts.getTime() : typeof ts === "string" ? Date.parse(ts) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw invalid(type, "timestamp", `${type}.timestamp must be a valid Date or an ISO 8601 string`);
  }
}

function invalid(type: CallType, field: string, message: string): AnalyticsError {
  return new AnalyticsError("invalid_call", message, { field: field || type });
}
