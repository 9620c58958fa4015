import {
  expressionViolations,
  type FieldViolation,
  filterViolations,
  httpMethodOf,
  methodOf,
  methodViolations,
} from "@hookpost/contract";
import { type Destination, HttpMethod } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { type DestinationFilterRecord, type DestinationRecord, shapingProblems } from "@hookpost/core";

/** The routing and shaping fields an update mask may name (docs/design/shaping.md). */
export const SHAPING_FIELDS = ["filter", "mapping", "method"] as const;
type ShapingField = (typeof SHAPING_FIELDS)[number];

/** The shape of the named shaping fields (lengths, known values); compiled later on the record. */
export function shapingFieldViolations(
  d: Destination,
  fields: ReadonlySet<string>,
  prefix: string,
): FieldViolation[] {
  const out: FieldViolation[] = [];
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
  };
}
