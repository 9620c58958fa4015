import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/**
 * protobuf-es decodes a map<string, …> into a plain object, so an entry keyed `__proto__` sets
 * the object's prototype (or nothing) instead of adding an entry: it vanishes without a trace.
 * This finds such keys in the encoded request, so that they can be refused instead of dropped.
 * (google.protobuf.Struct is left to the call contract, which has its own rules for it.)
 */
export const LOST_MAP_KEY = "__proto__";
const LOST_KEY_BYTES = Buffer.from(LOST_MAP_KEY);
const STRUCT = "google.protobuf.Struct";

/** Whether messages of this type can hold a string-keyed map (cached per type). */
const scanned = new Map<string, boolean>();

function hasStringMaps(desc: DescMessage, visiting = new Set<string>()): boolean {
  const known = scanned.get(desc.typeName);
  if (known !== undefined) return known;
  if (desc.typeName === STRUCT || visiting.has(desc.typeName)) return false;
  visiting.add(desc.typeName);
  const found = desc.fields.some((f) => {
    if (f.fieldKind === "map") {
      return (
        f.mapKey === ScalarType.STRING || (f.mapKind === "message" && hasStringMaps(f.message, visiting))
      );
    }
    if (f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message")) {
      return hasStringMaps(f.message, visiting);
    }
    return false;
  });
  visiting.delete(desc.typeName);
  if (visiting.size === 0) scanned.set(desc.typeName, found);
  return found;
}

/**
 * The paths (`values["__proto__"]`, `destination.headers["__proto__"]`) of map entries keyed
 * `__proto__` in `bytes`, a valid encoding of `desc`. Cheap when there are none: the bytes are
 * only walked when they contain the text.
 */
export function lostMapKeys(desc: DescMessage, bytes: Uint8Array): string[] {
  if (
    !hasStringMaps(desc) ||
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).indexOf(LOST_KEY_BYTES) < 0
  )
    return [];
  const out: string[] = [];
  walk(desc, bytes, "", out);
  return out;
}

function walk(desc: DescMessage, bytes: Uint8Array, prefix: string, out: string[]): void {
  if (desc.typeName === STRUCT) return;
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    const field = desc.fields.find((f) => f.number === no);
    if (wireType !== WireType.LengthDelimited || !field) {
      reader.skip(wireType, no);
      continue;
    }
    const data = reader.bytes();
    const path = prefix + field.name;
    if (field.fieldKind === "map") mapEntry(field, data, path, out);
    else if (field.fieldKind === "message" && hasStringMaps(field.message))
      walk(field.message, data, `${path}.`, out);
    else if (field.fieldKind === "list" && field.listKind === "message" && hasStringMaps(field.message))
      walk(field.message, data, `${path}[].`, out);
  }
}

function mapEntry(
  field: DescField & { fieldKind: "map" },
  entry: Uint8Array,
  path: string,
  out: string[],
): void {
  const reader = new BinaryReader(entry);
  let key = "";
  let value: Uint8Array | undefined;
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    if (no === 1 && field.mapKey === ScalarType.STRING && wireType === WireType.LengthDelimited)
      key = reader.string();
    else if (no === 2 && field.mapKind === "message" && wireType === WireType.LengthDelimited)
      value = reader.bytes();
    else reader.skip(wireType, no);
  }
  if (field.mapKey === ScalarType.STRING && key === LOST_MAP_KEY) out.push(`${path}[${JSON.stringify(key)}]`);
  if (value && field.mapKind === "message" && hasStringMaps(field.message))
    walk(field.message, value, `${path}[${JSON.stringify(key)}].`, out);
}
