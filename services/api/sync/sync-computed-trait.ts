import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import { type Entry, escapeField, type SortedSource } from "@hookpost/core";
import type { SyncDeps, SyncOptions } from "./deps.js";
import { runSync, type StreamReading, userIdProblem } from "./sync-engine.js";

/** One message of a SyncComputedTrait stream (the generated SyncComputedTraitRequest fits). */
export interface TraitChunk {
  traitName: string;
  values: { readonly [userId: string]: Value };
}

/** Fields of SyncComputedTraitResponse (int64 on the wire: wrap in BigInt). */
export interface SyncComputedTraitResult {
  /** Distinct users with a (non-null) value in this sync. */
  users: number;
  /** Identify calls with the new value sent: users new to the trait or whose value changed. */
  changed: number;
  /** Identify calls with `<key>: null` sent: users who no longer have a value. */
  left: number;
}

/** A trait value is at most this large as JSON. */
export const MAX_TRAIT_VALUE_BYTES = 16 * 1024;
const MAX_DEPTH = 32;

const TRAIT_STREAM: StreamReading<TraitChunk> = {
  nameField: "trait_name",
  what: "trait",
  nameOf: (req) => req.traitName,
  entriesOf: (req, message, bad) => {
    const entries: Array<[string, string]> = [];
    for (const [id, value] of Object.entries(req.values ?? {})) {
      if (bad.full) break;
      const field = `values[${JSON.stringify(id)}]`;
      const problem = userIdProblem(id);
      if (problem) {
        bad.add(field, `message ${message}: ${problem}`);
        continue;
      }
      try {
        const json = canonicalJson(value);
        if (Buffer.byteLength(json) > MAX_TRAIT_VALUE_BYTES) {
          bad.add(field, `message ${message}: a value is at most ${MAX_TRAIT_VALUE_BYTES} bytes as JSON`);
          continue;
        }
        entries.push([escapeField(id), json]);
      } catch (err) {
        bad.add(field, `message ${message}: ${(err as Error).message}`);
      }
    }
    return entries;
  },
};

/**
 * SyncComputedTrait (SPEC section 7): like syncAudience, with a value per user (`values`, user
 * id to google.protobuf.Value). Users whose value is new or changed (compared as canonical JSON:
 * object keys sorted) get an identify call `{<key>: <value>}`; users missing from this sync get
 * `{<key>: null}`. A `null` value counts as no value (the user is not in the trait). A user
 * repeated across messages keeps the value given last.
 */
export async function syncComputedTrait(
  deps: SyncDeps,
  sourceId: string,
  requests: AsyncIterable<TraitChunk>,
  options: SyncOptions = {},
): Promise<SyncComputedTraitResult> {
  const counts = await runSync(deps, "trait", sourceId, requests, TRAIT_STREAM, options, withoutNulls);
  return { users: counts.current, changed: counts.added + counts.changed, left: counts.left };
}

/**
 * The canonical JSON of a google.protobuf.Value: object keys sorted, so equal values compare
 * equal as strings. Throws (with a message for people) on unset kinds, non-finite numbers and
 * nesting deeper than 32.
 */
export function canonicalJson(value: Value): string {
  return JSON.stringify(toJsonValue(value, 0));
}

function toJsonValue(v: Value | undefined, depth: number): JsonValue {
  if (depth > MAX_DEPTH) throw new Error(`a value nests at most ${MAX_DEPTH} levels deep`);
  const kind = v?.kind;
  switch (kind?.case) {
    case "nullValue":
      return null;
    case "boolValue":
    case "stringValue":
      return kind.value;
    case "numberValue":
      if (!Number.isFinite(kind.value)) throw new Error("a number value must be finite");
      return kind.value;
    case "listValue":
      return kind.value.values.map((x) => toJsonValue(x, depth + 1));
    case "structValue": {
      const out: JsonObject = {};
      for (const k of Object.keys(kind.value.fields).sort()) {
        out[k] = toJsonValue(kind.value.fields[k], depth + 1);
      }
      return out;
    }
    default:
      return fail();
  }
}

function fail(): never {
  throw new Error("a value must be set (null, number, string, bool, struct or list)");
}

/** Drops entries whose (last) value is null: such users have no value. */
function withoutNulls(source: SortedSource): SortedSource {
  return {
    async next(): Promise<Entry | undefined> {
      for (let e = await source.next(); e !== undefined; e = await source.next()) {
        if (e.value !== "null") return e;
      }
      return undefined;
    },
    close: () => source.close(),
  };
}
