/**
 * A destination's routing and shaping fields (issue 27) as people read and write them, one
 * wording for the CLI and the console: only the parts that are set, durations as `30s`, `2h`.
 * Browser-safe (no Node or gRPC import): the console reads it through
 * `@hookpost/contract/shaping-text`.
 */

import { durationMs } from "@bufbuild/protobuf/wkt";
import { formatDuration, parseDuration } from "./duration.js";
import type { Batching, DestinationFilter, RetrySchedule } from "./gen/hookpost/v1/admin_pb.js";
import { EVENT_TYPES } from "./model/stored-call.js";

export { EVENT_TYPES, formatDuration, parseDuration };

/** A destination's filter: only the parts that are set. */
export interface FilterView {
  types?: string[];
  events?: string[];
  expression?: string;
}

/** A destination's own retry schedule, durations as "30s", "2h". */
export interface RetryView {
  window?: string;
  delays?: string[];
}

/** A destination's batching: only the parts that are set (bytes as a number, the wait as "1s"). */
export interface BatchingView {
  maxCalls?: number;
  maxBytes?: number;
  maxWait?: string;
}

/** null when the destination sends one call per request. */
export function batchingView(b: Batching | undefined): BatchingView | null {
  if (!b) return null;
  const out: BatchingView = {};
  if (b.maxCalls > 0) out.maxCalls = b.maxCalls;
  if (b.maxBytes > 0) out.maxBytes = b.maxBytes;
  if (b.maxWait) out.maxWait = formatDuration(durationMs(b.maxWait));
  return out;
}

/** null when the filter lets every call through (unset, or every part empty). */
export function filterView(f: DestinationFilter | undefined): FilterView | null {
  if (!f) return null;
  const out: FilterView = {};
  if (f.types.length > 0) out.types = [...f.types];
  if (f.events.length > 0) out.events = [...f.events];
  if (f.expression !== "") out.expression = f.expression;
  return Object.keys(out).length > 0 ? out : null;
}

/** null when the destination follows the server's schedule. */
export function retryView(r: RetrySchedule | undefined): RetryView | null {
  if (!r) return null;
  const out: RetryView = {};
  if (r.window) out.window = formatDuration(durationMs(r.window));
  if (r.delays.length > 0) out.delays = r.delays.map((x) => formatDuration(durationMs(x)));
  return Object.keys(out).length > 0 ? out : null;
}

/** `10s, 1m, 5m` (commas and/or spaces) in milliseconds; throws at the first that is no duration. */
export function parseDurationList(text: string): number[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((t) => parseDuration(t));
}
