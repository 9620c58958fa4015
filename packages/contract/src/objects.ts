import type { JsonValue } from "@bufbuild/protobuf";
import { MAX_OBJECT_DEPTH } from "./limits.js";
import { numberValueProblem } from "./numbers.js";
import type { Violation } from "./violation.js";

/**
 * Why a free-form object (context, traits, properties) cannot be carried faithfully, or
 * undefined: numbers that JSON cannot hold (NaN, Infinity), nesting deeper than
 * MAX_OBJECT_DEPTH, and a key named `__proto__`, which a plain JavaScript object cannot hold
 * as data (assigning it changes the prototype), so it would be silently dropped on the way.
 * `path` names the object (`properties`) in the description.
 */
export function objectProblem(value: JsonValue, path: string): string | undefined {
  return walk(value, path, 1)?.description;
}

/**
 * objectProblem as a violation: a number that JSON cannot hold is named by its own path
 * (`properties.price`), other problems by the object's (`path`).
 */
export function objectViolation(value: JsonValue, path: string): Violation | undefined {
  const found = walk(value, path, 1);
  return found && { field: found.at ?? path, description: found.description };
}

interface Found {
  /** The path of the offending value, when it is named by it. */
  at?: string;
  description: string;
}

function walk(v: JsonValue, path: string, depth: number): Found | undefined {
  if (typeof v === "string") return startsWithBom(v) ? { description: bomProblem(path) } : undefined;
  if (typeof v === "number") {
    const description = numberValueProblem(v, path);
    return description === undefined ? undefined : { at: path, description };
  }
  if (v === null || typeof v !== "object") return undefined;
  if (depth > MAX_OBJECT_DEPTH) return { description: `nests deeper than ${MAX_OBJECT_DEPTH} levels` };
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const p = walk(v[i]!, `${path}[${i}]`, depth + 1);
      if (p) return p;
    }
    return undefined;
  }
  // A prototype other than Object.prototype means `__proto__` was assigned somewhere on the way.
  const proto = Object.getPrototypeOf(v);
  if (Object.hasOwn(v, "__proto__") || (proto !== Object.prototype && proto !== null)) {
    return { description: protoKeyProblem(`${path}.__proto__`) };
  }
  for (const k of Object.keys(v)) {
    if (startsWithBom(k)) return { description: bomProblem(`${path}.${k} (a key)`) };
    const p = walk(v[k]!, `${path}.${k}`, depth + 1);
    if (p) return p;
  }
  return undefined;
}

/** The description of a `__proto__` key found at `path`. */
export function protoKeyProblem(path: string): string {
  return `has a key named "__proto__" (${path}), which is not allowed: JavaScript objects cannot hold it as data, so it would be lost`;
}

/**
 * True when the text starts with U+FEFF. A UTF-8 decoder (protobuf's) strips a leading byte
 * order mark, so such a string would arrive changed over gRPC: refused on every transport.
 */
export function startsWithBom(text: string): boolean {
  return text.charCodeAt(0) === 0xfeff;
}

export function bomProblem(path: string): string {
  return `${path} starts with a byte order mark (U+FEFF), which decoding strips: refused rather than changed`;
}
