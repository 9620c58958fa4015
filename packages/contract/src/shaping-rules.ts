/**
 * The rules of a destination's routing and shaping fields (issue 27, docs/design/shaping.md):
 * filter, mapping and method. Shape only: the admin API also compiles the expressions (core's
 * webhook module), which the CLI cannot do without the server's JSONata.
 */

import { formatDuration } from "./duration.js";
import { DeliveryMode, HttpMethod } from "./gen/hookpost/v1/admin_pb.js";
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

export const MAX_BATCHING_CALLS = 1000;
export const DEFAULT_BATCHING_CALLS = 100;
export const MIN_BATCHING_BYTES = 1024;
export const MAX_BATCHING_BYTES = 1024 * 1024;
export const DEFAULT_BATCHING_BYTES = 512 * 1024;
export const MAX_BATCHING_WAIT_MS = 60_000;
export const DEFAULT_BATCHING_WAIT_MS = 1_000;

/** A destination's batching as stored (core's DestinationRecord); absent parts: the defaults. */
export interface BatchingSettings {
  maxCalls?: number | undefined;
  maxBytes?: number | undefined;
  maxWaitMs?: number | undefined;
}

/** A batching with every part set (the defaults where the record has none). */
export function batchingLimits(b: BatchingSettings): Required<{
  [K in keyof BatchingSettings]: number;
}> {
  return {
    maxCalls: b.maxCalls || DEFAULT_BATCHING_CALLS,
    maxBytes: b.maxBytes || DEFAULT_BATCHING_BYTES,
    maxWaitMs: b.maxWaitMs ?? DEFAULT_BATCHING_WAIT_MS,
  };
}

/** max_calls 1..1000, max_bytes 1 KiB..1 MiB, max_wait 0..60 s (0 for calls and bytes: the default). */
export function batchingViolations(b: BatchingSettings, field: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (b.maxCalls !== undefined && b.maxCalls !== 0 && (b.maxCalls < 1 || b.maxCalls > MAX_BATCHING_CALLS)) {
    out.push({
      field: `${field}.max_calls`,
      description: `must be 1 to ${MAX_BATCHING_CALLS} calls, got ${b.maxCalls}`,
    });
  }
  if (
    b.maxBytes !== undefined &&
    b.maxBytes !== 0 &&
    (b.maxBytes < MIN_BATCHING_BYTES || b.maxBytes > MAX_BATCHING_BYTES)
  ) {
    out.push({
      field: `${field}.max_bytes`,
      description: `must be ${MIN_BATCHING_BYTES} to ${MAX_BATCHING_BYTES} bytes (1 KiB to 1 MiB), got ${b.maxBytes}`,
    });
  }
  if (b.maxWaitMs !== undefined && (b.maxWaitMs < 0 || b.maxWaitMs > MAX_BATCHING_WAIT_MS)) {
    out.push({
      field: `${field}.max_wait`,
      description: `must be 0s to ${formatDuration(MAX_BATCHING_WAIT_MS)}, got ${formatDuration(b.maxWaitMs)}`,
    });
  }
  return out;
}

/** How a destination with several URLs delivers; FAILOVER (the seed's) when absent. */
export type DeliveryModeName = "FAILOVER" | "FAN_OUT";

/** hookpost.v1.DeliveryMode: a known value (UNSPECIFIED reads as FAILOVER, or keeps it on an update). */
export function deliveryModeViolations(value: number, field: string): FieldViolation[] {
  if (Object.values(DeliveryMode).includes(value)) return [];
  return [
    {
      field,
      description: `unknown delivery mode ${value}: use DELIVERY_MODE_FAILOVER or DELIVERY_MODE_FAN_OUT`,
    },
  ];
}

/** The stored mode of a proto value; undefined for FAILOVER (the default, stored absent). */
export function deliveryModeOf(value: DeliveryMode): "FAN_OUT" | undefined {
  return value === DeliveryMode.FAN_OUT ? "FAN_OUT" : undefined;
}

/** The proto value of a stored mode. */
export function deliveryModeValue(mode: "FAN_OUT" | undefined): DeliveryMode {
  return mode === "FAN_OUT" ? DeliveryMode.FAN_OUT : DeliveryMode.FAILOVER;
}
