import { EVENT_TYPES } from "./model/stored-call.js";

/** The call types a search takes (the console lists them). */
export { EVENT_TYPES as CALL_TYPES };

import type { Violation as FieldViolation } from "./violation.js";

/**
 * The rules of an attempt-log search (AdminService.SearchAttempts), shared by the API, the CLI
 * and the console: what each filter accepts and how the text forms (`5xx`, `dead-lettered`) read.
 */

/** Longest event name or user id a search takes (records keep event names cut at 256 characters). */
export const MAX_SEARCH_TEXT_CHARS = 1024;

/** The statuses, as the CLI and the console spell them (LogStatus values 1 to 4, in order). */
export const LOG_STATUS_NAMES = ["delivered", "failed", "filtered", "dead-lettered"] as const;
export type LogStatusName = (typeof LOG_STATUS_NAMES)[number];

/** `delivered`, `dead-lettered` (or `dead_lettered`, `dead`): the LogStatus value (1-4), or undefined. */
export function logStatusOf(text: string): number | undefined {
  const t = text.trim().toLowerCase().replace(/_/g, "-");
  const i = LOG_STATUS_NAMES.indexOf((t === "dead" ? "dead-lettered" : t) as LogStatusName);
  return i < 0 ? undefined : i + 1;
}

/** `500` or `5xx`: an exact status or a class; undefined when it is neither. */
export function httpStatusFilterOf(
  text: string,
): { httpStatus?: number; httpStatusClass?: number } | undefined {
  const t = text.trim().toLowerCase();
  if (/^[1-5]xx$/.test(t)) return { httpStatusClass: Number(t[0]) };
  if (/^\d{3}$/.test(t) && Number(t) >= 100 && Number(t) <= 599) return { httpStatus: Number(t) };
  return undefined;
}

export interface SearchFilterFields {
  statuses: readonly number[];
  httpStatus: number;
  httpStatusClass: number;
  sinceMs?: number | undefined;
  untilMs?: number | undefined;
  callType: string;
  event: string;
  userId: string;
  messageId: string;
}

/** What is wrong with a search's filters (ids are checked by the API: they are the stores' rules). */
export function searchFilterViolations(f: SearchFilterFields): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (f.statuses.some((s) => !Number.isInteger(s) || s < 1 || s > LOG_STATUS_NAMES.length)) {
    out.push({ field: "statuses", description: `use ${LOG_STATUS_NAMES.join(", ")}` });
  }
  if (f.httpStatus !== 0 && (f.httpStatus < 100 || f.httpStatus > 599)) {
    out.push({ field: "http_status", description: "is an HTTP status from 100 to 599 (0: any)" });
  }
  if (f.httpStatusClass !== 0 && (f.httpStatusClass < 1 || f.httpStatusClass > 5)) {
    out.push({ field: "http_status_class", description: "is 1 to 5 (5: every 5xx; 0: any)" });
  }
  if (f.httpStatus !== 0 && f.httpStatusClass !== 0) {
    out.push({ field: "http_status_class", description: "set either http_status or http_status_class" });
  }
  if (f.sinceMs !== undefined && f.untilMs !== undefined && f.untilMs <= f.sinceMs) {
    out.push({ field: "until", description: "must be after since" });
  }
  if (f.callType !== "" && !(EVENT_TYPES as readonly string[]).includes(f.callType)) {
    out.push({ field: "call_type", description: `use ${EVENT_TYPES.join(", ")}` });
  }
  for (const [field, value] of [
    ["event", f.event],
    ["user_id", f.userId],
    ["message_id", f.messageId],
  ] as const) {
    if (value.length > MAX_SEARCH_TEXT_CHARS) {
      out.push({ field, description: `is too long: at most ${MAX_SEARCH_TEXT_CHARS} characters` });
    }
  }
  return out;
}
