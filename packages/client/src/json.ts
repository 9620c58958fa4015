import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { numberValueProblem, protoKeyProblem } from "@hookpost/contract";
import { AnalyticsError } from "./analytics-error.js";

/**
 * Turns user data into the JSON a protobuf Struct can hold, with JSON.stringify's rules
 * (toJSON is honoured, so Dates become ISO strings; undefined, functions and symbols are dropped
 * from objects and become null in arrays). What JSON.stringify would throw on (cycles, BigInt) or
 * silently change (NaN and Infinity, which it writes as null) is an `invalid_call` naming the path,
 * raised at enqueue rather than failing a whole batch later or delivering another value.
 */
export function toJsonObject(value: object, path: string): JsonObject {
  const out = convert(value, path, new Set());
  if (out === null || typeof out !== "object" || Array.isArray(out)) {
    throw new AnalyticsError("invalid_call", `${path} must be an object`, { field: path });
  }
  return out as JsonObject;
}

function convert(value: unknown, path: string, seen: Set<object>): JsonValue | undefined {
  if (
    value !== null &&
    typeof value === "object" &&
    typeof (value as { toJSON?: unknown }).toJSON === "function"
  ) {
    value = (value as { toJSON: (key: string) => unknown }).toJSON(path);
  }
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number": {
      const problem = numberValueProblem(value, path);
      if (problem) throw new AnalyticsError("invalid_call", problem, { field: path });
      return value;
    }
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
    case "bigint":
      throw new AnalyticsError("invalid_call", `${path} is a BigInt, which JSON cannot carry`, {
        field: path,
      });
  }
  if (value === null) return null;
  const obj = value as object;
  if (seen.has(obj)) {
    throw new AnalyticsError("invalid_call", `${path} refers to itself (circular structure)`, {
      field: path,
    });
  }
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      return obj.map((item, i) => convert(item, `${path}[${i}]`, seen) ?? null);
    }
    const out: JsonObject = {};
    for (const key of Object.keys(obj)) {
      // Assigning it would set the prototype: the key would vanish instead of being sent.
      if (key === "__proto__") {
        throw new AnalyticsError("invalid_call", `${path} ${protoKeyProblem(`${path}.__proto__`)}`, {
          field: path,
        });
      }
      const v = convert((obj as Record<string, unknown>)[key], `${path}.${key}`, seen);
      if (v !== undefined) out[key] = v;
    }
    return out;
  } finally {
    seen.delete(obj);
  }
}
