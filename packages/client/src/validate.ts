import {
  CALL_STRING_FIELDS,
  type ContractCall,
  validateCall as contractRules,
  fromDate,
  InvalidTimestamp,
  parseIsoTimestamp,
  type Timestamp,
} from "@hookpost/contract";
import { AnalyticsError } from "./analytics-error.js";
import type { CallType } from "./calls.js";

const OBJECT_FIELDS = ["context", "traits", "properties", "integrations"] as const;

/**
 * The rules of the ingest contract (contract/, SPEC section 3), checked at enqueue so a bad call throws where
 * it was made instead of failing a whole batch, all-or-nothing, on the server later.
 */
export function validateCall(type: CallType, params: unknown): void {
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    throw invalid(type, "", `${type} needs an object of fields`);
  }
  const p = params as Record<string, unknown>;
  for (const f of CALL_STRING_FIELDS) {
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
  // The contract's rules (the same as the server's), on the fields' contract form. Free-form
  // objects are checked once converted to JSON (encode.ts).
  const call: ContractCall = {
    type,
    messageId: (p.messageId as string | undefined) ?? "",
    userId: (p.userId as string | undefined) ?? "",
    anonymousId: (p.anonymousId as string | undefined) ?? "",
    timestamp: p.timestamp === undefined ? undefined : clientTimestamp(p.timestamp),
    integrations: p.integrations as Record<string, boolean> | undefined,
    event: p.event as string | undefined,
    groupId: p.groupId as string | undefined,
    previousId: p.previousId as string | undefined,
  };
  const [first] = contractRules(call, "json");
  if (first) throw invalid(type, first.field, `${type}.${first.field} ${first.description}`);
}

/** A call's timestamp in contract form: a Date, or an ISO 8601 text with an offset. */
export function clientTimestamp(ts: unknown): Timestamp {
  if (ts instanceof Date) return fromDate(ts);
  if (typeof ts === "string") return parseIsoTimestamp(ts);
  return new InvalidTimestamp("must be a Date or an ISO 8601 string");
}

function invalid(type: CallType, field: string, message: string): AnalyticsError {
  return new AnalyticsError("invalid_call", message, { field: field || type });
}
