import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import {
  batchingViolations,
  deliveryModeOf,
  deliveryModeValue,
  deliveryModeViolations,
  expressionViolations,
  type FieldViolation,
  filterViolations,
  httpMethodOf,
  isTemplate,
  methodOf,
  methodViolations,
  retryViolations,
} from "@hookpost/contract";
import {
  type Batching,
  DeliveryMode,
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
export const SHAPING_FIELDS = ["filter", "mapping", "method", "retry", "batching", "delivery_mode"] as const;
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
  if (fields.has("batching") && d.batching)
    out.push(...batchingViolations(batchingOf(d.batching), `${prefix}batching`));
  if (fields.has("delivery_mode"))
    out.push(...deliveryModeViolations(d.deliveryMode, `${prefix}delivery_mode`));
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
  if (has("batching")) {
    if (d.batching) record.batching = batchingOf(d.batching);
    else delete record.batching;
  }
  if (has("delivery_mode") && (d.deliveryMode !== DeliveryMode.UNSPECIFIED || masked)) {
    const m = deliveryModeOf(d.deliveryMode);
    if (m === undefined) delete record.deliveryMode;
    else record.deliveryMode = m;
  }
  if (has("method") && (d.method !== HttpMethod.UNSPECIFIED || masked)) {
    const m = methodOf(d.method);
    if (m === undefined || m === "POST") delete record.method;
    else record.method = m;
  }
}

/**
 * The record's expressions and templates compiled (each problem at its field, with the position),
 * and the combinations batching cannot serve (docs/design/shaping.md section 7.1).
 */
export function compiledViolations(record: DestinationRecord, prefix: string): FieldViolation[] {
  const out = shapingProblems(record).map(({ field, problem }) => ({
    field: `${prefix}${field}`,
    description: problem,
  }));
  if (record.deliveryMode === "FAN_OUT" && record.ordering === "PER_USER") {
    out.push({
      field: `${prefix}delivery_mode`,
      description: "FAN_OUT cannot be used with ordering PER_USER: each URL would need its own order",
    });
  }
  if (record.batching) {
    if (record.ordering === "PER_USER") {
      out.push({
        field: `${prefix}batching`,
        description:
          "cannot be used with ordering PER_USER: a batch mixes users, ordered delivery sends one call per user at a time",
      });
    }
    record.urls.forEach((url, i) => {
      if (isTemplate(url))
        out.push({
          field: `${prefix}urls[${i}]`,
          description: "holds a placeholder, which renders one call: not with batching",
        });
    });
    for (const [name, value] of Object.entries(record.headers ?? {})) {
      if (isTemplate(value))
        out.push({
          field: `${prefix}headers[${JSON.stringify(name)}]`,
          description: "holds a placeholder, which renders one call: not with batching",
        });
    }
  }
  return out;
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
    deliveryMode: deliveryModeValue(d.deliveryMode),
    ...(d.batching
      ? {
          batching: {
            maxCalls: d.batching.maxCalls ?? 0,
            maxBytes: d.batching.maxBytes ?? 0,
            ...(d.batching.maxWaitMs === undefined ? {} : { maxWait: durationFromMs(d.batching.maxWaitMs) }),
          },
        }
      : {}),
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

/** The stored batching of a proto one: only the parts that are set (0 and unset: the default). */
function batchingOf(b: Batching): { maxCalls?: number; maxBytes?: number; maxWaitMs?: number } {
  const out: { maxCalls?: number; maxBytes?: number; maxWaitMs?: number } = {};
  if (b.maxCalls > 0) out.maxCalls = b.maxCalls;
  if (b.maxBytes > 0) out.maxBytes = b.maxBytes;
  if (b.maxWait) out.maxWaitMs = durationMs(b.maxWait);
  return out;
}
