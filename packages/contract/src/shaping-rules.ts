/**
 * The rules of a destination's routing and shaping fields (issue 27, docs/design/shaping.md):
 * filter, mapping and method. Shape only: the admin API also compiles the expressions (core's
 * webhook module), which the CLI cannot do without the server's JSONata.
 */

import { formatDuration } from "./duration.js";
import { HttpMethod } from "./gen/hookpost/v1/admin_pb.js";
import type { FieldViolation } from "./grpc/hookpost-error.js";
import { EVENT_TYPES } from "./model/stored-call.js";

export const MAX_EXPRESSION_CHARS = 4096;
export const MAX_FILTER_EVENTS = 100;
export const MAX_FILTER_EVENT_CHARS = 200;

/** A destination's filter as stored (core's DestinationRecord); absent parts pass. */
export interface FilterSettings {
  types?: readonly string[] | undefined;
  events?: readonly string[] | undefined;
  expression?: string | undefined;
}

/** The methods a destination may use; POST when absent. */
export type Method = "POST" | "PUT" | "PATCH";

/** Types known (deletion notices included), no duplicates; events 1..200 characters, ≤ 100. */
export function filterViolations(filter: FilterSettings, field: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  const types = filter.types ?? [];
  const seenTypes = new Set<string>();
  types.forEach((t, i) => {
    if (!(EVENT_TYPES as readonly string[]).includes(t)) {
      out.push({
        field: `${field}.types[${i}]`,
        description: `unknown call type "${t}": use ${EVENT_TYPES.join(", ")}`,
      });
    } else if (seenTypes.has(t))
      out.push({ field: `${field}.types[${i}]`, description: `"${t}" is listed twice` });
    seenTypes.add(t);
  });
  const events = filter.events ?? [];
  if (events.length > MAX_FILTER_EVENTS) {
    out.push({
      field: `${field}.events`,
      description: `at most ${MAX_FILTER_EVENTS} event names, got ${events.length}`,
    });
  } else {
    const seen = new Set<string>();
    events.forEach((e, i) => {
      const f = `${field}.events[${i}]`;
      if (e === "" || e.length > MAX_FILTER_EVENT_CHARS) {
        out.push({ field: f, description: `an event name is 1 to ${MAX_FILTER_EVENT_CHARS} characters` });
      } else if (seen.has(e)) out.push({ field: f, description: `"${e}" is listed twice` });
      seen.add(e);
    });
  }
  out.push(...expressionViolations(filter.expression, `${field}.expression`));
  return out;
}

/** A filter expression or mapping: at most 4 KiB (compiled by the admin API). */
export function expressionViolations(text: string | undefined, field: string): FieldViolation[] {
  if (text === undefined || text.length <= MAX_EXPRESSION_CHARS) return [];
  return [
    { field, description: `is too long: at most ${MAX_EXPRESSION_CHARS} characters, got ${text.length}` },
  ];
}

/** hookpost.v1.HttpMethod: a known value (UNSPECIFIED reads as POST, or keeps it on an update). */
export function methodViolations(value: number, field: string): FieldViolation[] {
  if (Object.values(HttpMethod).includes(value)) return [];
  return [
    {
      field,
      description: `unknown method ${value}: use HTTP_METHOD_POST, HTTP_METHOD_PUT or HTTP_METHOD_PATCH`,
    },
  ];
}

/** The stored method of a proto value; undefined for POST (the default, stored absent). */
export function methodOf(value: HttpMethod): Method | undefined {
  if (value === HttpMethod.PUT) return "PUT";
  if (value === HttpMethod.PATCH) return "PATCH";
  return undefined;
}

/** The proto value of a stored method. */
export function httpMethodOf(method: Method | undefined): HttpMethod {
  if (method === "PUT") return HttpMethod.PUT;
  if (method === "PATCH") return HttpMethod.PATCH;
  return HttpMethod.POST;
}

/**
 * Whether a call passes a filter's lists (types, then events); the reason when it does not. The
 * expression is evaluated by core's webhook module.
 */
export function filterListsDecision(
  call: { type: string; event?: unknown },
  filter: FilterSettings,
): string | undefined {
  if (filter.types && filter.types.length > 0 && !filter.types.includes(call.type)) return "filter: type";
  if (
    call.type === "track" &&
    filter.events &&
    filter.events.length > 0 &&
    !(typeof call.event === "string" && filter.events.includes(call.event))
  ) {
    return "filter: event";
  }
  return undefined;
}

export const MAX_RETRY_DELAYS = 20;
export const MIN_RETRY_WINDOW_MS = 60_000;
export const MIN_RETRY_DELAY_MS = 1_000;

/** A destination's retry schedule as stored (core's DestinationRecord); absent parts: the server's. */
export interface RetrySettings {
  windowMs?: number | undefined;
  delaysMs?: readonly number[] | undefined;
}

/**
 * A destination's retry schedule within the server's bounds: window 1 minute to RETRY_WINDOW,
 * 1 to 20 delays of 1 s to RETRY_MAX_DELAY each (the last repeats).
 */
export function retryViolations(
  retry: RetrySettings,
  bounds: { windowMs: number; maxDelayMs: number },
  field: string,
): FieldViolation[] {
  const out: FieldViolation[] = [];
  const w = retry.windowMs;
  if (w !== undefined && (w < MIN_RETRY_WINDOW_MS || w > bounds.windowMs)) {
    out.push({
      field: `${field}.window`,
      description: `must be ${formatDuration(MIN_RETRY_WINDOW_MS)} to ${formatDuration(bounds.windowMs)} (RETRY_WINDOW), got ${formatDuration(w)}`,
    });
  }
  const delays = retry.delaysMs ?? [];
  if (delays.length > MAX_RETRY_DELAYS) {
    out.push({
      field: `${field}.delays`,
      description: `at most ${MAX_RETRY_DELAYS} delays, got ${delays.length}`,
    });
    return out;
  }
  delays.forEach((d, i) => {
    if (d < MIN_RETRY_DELAY_MS || d > bounds.maxDelayMs) {
      out.push({
        field: `${field}.delays[${i}]`,
        description: `must be ${formatDuration(MIN_RETRY_DELAY_MS)} to ${formatDuration(bounds.maxDelayMs)} (RETRY_MAX_DELAY), got ${formatDuration(d)}`,
      });
    }
  });
  return out;
}
