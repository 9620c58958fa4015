import { randomBytes } from "node:crypto";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  Code,
  type FieldViolation,
  fromProtoTimestamp,
  HookpostError,
  hasControlChar,
  timestampProblem,
} from "@hookpost/contract";
import { ID_PATTERN, OPERATOR_TARGET_PREFIX } from "@hookpost/core";

/** A fresh id such as `src_3f9a0c1d2b4e5f60` (64 random bits, within ID_PATTERN). */
export function generateId(prefix: "src" | "dst" | "opw"): string {
  return `${prefix}_${randomBytes(8).toString("hex")}`;
}

/** Rules for an id a caller chose (ids become NATS subject tokens and consumer names). */
export function idViolations(id: string, field: string): FieldViolation[] {
  if (id.startsWith(OPERATOR_TARGET_PREFIX)) {
    // Operator webhooks are delivered as destinations with these ids (core's model/operator-webhook.ts).
    return [
      {
        field,
        description: `ids starting with "${OPERATOR_TARGET_PREFIX}" are reserved for operator webhooks`,
      },
    ];
  }
  return ID_PATTERN.test(id)
    ? []
    : [
        {
          field,
          description: "use 1 to 64 letters, digits, '-' or '_' (or leave it empty to get one generated)",
        },
      ];
}

/** For Get/Delete-style requests: the id is required and must be well formed. */
export function requiredIdViolations(id: string, field = "id"): FieldViolation[] {
  if (id === "") return [{ field, description: "is required" }];
  return ID_PATTERN.test(id) ? [] : [{ field, description: "is not a valid id (letters, digits, '-', '_')" }];
}

/** For filters: the id may be left empty, else it must be well formed. */
export function optionalIdViolations(id: string, field: string): FieldViolation[] {
  return id === "" ? [] : requiredIdViolations(id, field);
}

/** The destination and source filters of a read of the attempt log: optional, well formed. */
export function logFilterViolations(req: { destinationId: string; sourceId: string }): FieldViolation[] {
  return [
    ...optionalIdViolations(req.destinationId, "destination_id"),
    ...optionalIdViolations(req.sourceId, "source_id"),
  ];
}

/** NOT_FOUND for an id that names nothing, worded alike for every kind. */
export function notFound(kind: "destination" | "source" | "operator webhook", id: string): HookpostError {
  return new HookpostError(Code.NOT_FOUND, `${kind} "${id}" does not exist`);
}

export const MAX_NAME_CHARS = 200;

/** A display name: required, at most 200 characters, no control characters. */
export function nameViolations(name: string, field: string): FieldViolation[] {
  if (name.trim() === "") return [{ field, description: "is required" }];
  if ([...name].length > MAX_NAME_CHARS) {
    return [{ field, description: `is too long: at most ${MAX_NAME_CHARS} characters` }];
  }
  if (hasControlChar(name)) return [{ field, description: "must not contain control characters" }];
  return [];
}

/**
 * An optional time filter (`since`, `until`) in milliseconds, undefined when unset. A time a
 * Date cannot hold would compare as NaN and match nothing (an empty answer for a typo): a time
 * outside the contract's range (0001 to 9999) adds a violation to `violations` instead.
 */
export function timeFilter(
  ts: Timestamp | undefined,
  field: string,
  violations: FieldViolation[],
): number | undefined {
  if (ts === undefined) return undefined;
  const problem = timestampProblem(fromProtoTimestamp(ts.seconds, ts.nanos));
  if (problem !== undefined) {
    violations.push({ field, description: problem });
    return undefined;
  }
  return timestampDate(ts).getTime();
}
