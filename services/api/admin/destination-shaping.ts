import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import {
  expressionViolations,
  type FieldViolation,
  filterViolations,
  httpMethodOf,
  methodOf,
  methodViolations,
  retryViolations,
} from "@hookpost/contract";
import {
  type Destination,
  HttpMethod,
  type RetrySchedule,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  DEFAULT_TOPOLOGY,
  type DestinationFilterRecord,
  type DestinationRecord,
  shapingProblems,
} from "@hookpost/core";

/** The routing and shaping fields an update mask may name (docs/design/shaping.md). */
export const SHAPING_FIELDS = ["filter", "mapping", "method", "retry"] as const;
type ShapingField = (typeof SHAPING_FIELDS)[number];

/** The shape of the named shaping fields (lengths, known values); compiled later on the record. */
export function shapingFieldViolations(
  d: Destination,
  fields: ReadonlySet<string>,
  prefix: string,
  retryBounds: { windowMs: number; maxDelayMs: number } = {
    windowMs: DEFAULT_TOPOLOGY.retryWindowMs,
    maxDelayMs: DEFAULT_TOPOLOGY.retryMaxDelayMs,
  },
): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (fields.has("retry") && d.retry)
    out.push(...retryViolations(retryOf(d.retry), retryBounds, `${prefix}retry`));
  if (fields.has("filter") && d.filter) out.push(...filterViolations(d.filter, `${prefix}filter`));
  if (fields.has("mapping")) out.push(...expressionViolations(d.mapping, `${prefix}mapping`));
  if (fields.has("method")) out.push(...methodViolations(d.method, `${prefix}method`));
  return out;
}

/**
 * Sets the named shaping fields on `record`. filter and mapping are replaced (unset or empty:
 * none); method as ordering: `masked` (named in an update mask) makes UNSPECIFIED mean POST,
 * otherwise UNSPECIFIED keeps what the record has.
 */
export function setShaping(
  record: DestinationRecord,
  d: Destination,
  fields: ReadonlySet<string>,
  masked: boolean,
): void {
  const has = (f: ShapingField) => fields.has(f);
  if (has("filter")) {
    const f: DestinationFilterRecord = {};
    if (d.filter?.types.length) f.types = [...d.filter.types];
    if (d.filter?.events.length) f.events = [...d.filter.events];
    if (d.filter?.expression) f.expression = d.filter.expression;
    if (Object.keys(f).length > 0) record.filter = f;
    else delete record.filter;
  }
  if (has("mapping")) {
    if (d.mapping !== "") record.mapping = d.mapping;
    else delete record.mapping;
  }
  if (has("retry")) {
    const r = d.retry ? retryOf(d.retry) : {};
    if (r.windowMs !== undefined || r.delaysMs !== undefined) record.retry = r;
    else delete record.retry;
  }
  if (has("method") && (d.method !== HttpMethod.UNSPECIFIED || masked)) {
    const m = methodOf(d.method);
    if (m === undefined || m === "POST") delete record.method;
    else record.method = m;
  }
}

/** The record's expressions and templates compiled: each problem at its field, with the position. */
export function compiledViolations(record: DestinationRecord, prefix: string): FieldViolation[] {
  return shapingProblems(record).map(({ field, problem }) => ({
    field: `${prefix}${field}`,
    description: problem,
  }));
}

/** The shaping fields of a stored destination as the admin API shows them. */
export function shapingToProto(d: DestinationRecord) {
  return {
    ...(d.filter
      ? {
          filter: {
            types: [...(d.filter.types ?? [])],
            events: [...(d.filter.events ?? [])],
            expression: d.filter.expression ?? "",
          },
        }
      : {}),
    mapping: d.mapping ?? "",
    method: httpMethodOf(d.method),
    ...(d.retry
      ? {
          retry: {
            ...(d.retry.windowMs === undefined ? {} : { window: durationFromMs(d.retry.windowMs) }),
            delays: (d.retry.delaysMs ?? []).map((ms) => durationFromMs(ms)),
          },
        }
      : {}),
  };
}

/** The stored schedule of a proto one: only the parts that are set. */
function retryOf(r: RetrySchedule): { windowMs?: number; delaysMs?: number[] } {
  const out: { windowMs?: number; delaysMs?: number[] } = {};
  if (r.window) out.windowMs = durationMs(r.window);
  if (r.delays.length > 0) out.delaysMs = r.delays.map((d) => durationMs(d));
  return out;
}
