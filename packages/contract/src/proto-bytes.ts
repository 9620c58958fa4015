import { type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { BatchCallSchema } from "./gen/hookpost/v1/ingest_pb.js";

/*
 * Reads what the contract needs from the protobuf bytes as they arrived, without decoding or
 * re-encoding (protobuf-es's toBinary costs ~75 µs per call with Structs): the encoded size of
 * each call of a BatchRequest, and what the decoder would silently lose (see findLoss).
 */

const PROTO_KEY = Buffer.from("__proto__");
const STRUCT = "google.protobuf.Struct";
const VALUE = "google.protobuf.Value";
const LIST = "google.protobuf.ListValue";

/** The byte range of each call of a BatchRequest (the oneof member's contents), in order. */
export function batchCallRanges(request: Uint8Array): Array<{ no: number; start: number; end: number }> {
  const out: Array<{ no: number; start: number; end: number }> = [];
  forEachField(request, 0, request.length, (no, start, end) => {
    if (no !== 1) return;
    let last = { no: 0, start: 0, end: 0 };
    forEachField(request, start, end, (member, s, e) => {
      last = { no: member, start: s, end: e };
    });
    out.push(last);
  });
  return out;
}

/** The request schema of a call type (a BatchCall oneof member). */
export function callSchemaByType(type: string): DescMessage {
  const f = BatchCallSchema.fields.find((x) => x.localName === type);
  if (f?.fieldKind !== "message") throw new Error(`BatchCall has no call type ${type}`);
  return f.message;
}

/** The BatchCall oneof member (a call request schema) with this field number. */
export function callSchemaOf(memberNo: number): DescMessage | undefined {
  const f = BatchCallSchema.fields.find((x) => x.number === memberNo);
  return f?.fieldKind === "message" ? f.message : undefined;
}

/**
 * Something the decoder would silently lose: a `__proto__` key, a string's leading BOM, or a key
 * written twice in one Struct or map (decoding keeps the last).
 */
export interface Loss {
  kind: "proto-key" | "bom" | "duplicate-key";
  /** Proto field names and Struct keys: `properties.a.__proto__`, `message_id`. */
  path: string;
}

/**
 * The first thing decoding would silently lose in the message `desc` encoded in
 * bytes[start, end): a `__proto__` key in a Struct or map (stored in a plain object, it sets the
 * prototype instead), or a string starting with U+FEFF (the UTF-8 decoder strips a leading byte
 * order mark, so `\uFEFFid` would become `id`), or a key repeated within one Struct or map (only
 * the last value would be kept). Walks the whole request: this is the full path, taken only for
 * requests the fast path (proto-wire.ts) left to it.
 */
export function findLoss(
  desc: DescMessage,
  bytes: Uint8Array,
  start = 0,
  end = bytes.length,
): Loss | undefined {
  return walkMessage(desc, bytes, start, end, "");
}

/** A message field's contents: the JSON well-known types by their own layout, any other message field by field. */
function walkMessage(
  desc: DescMessage,
  bytes: Uint8Array,
  start: number,
  end: number,
  path: string,
): Loss | undefined {
  switch (desc.typeName) {
    case STRUCT:
      return walkStruct(bytes, start, end, path);
    case VALUE:
      return walkValue(bytes, start, end, path);
    case LIST:
      return walkList(bytes, start, end, path);
  }
  let found: Loss | undefined;
  /** Keys of each map field seen so far. */
  const mapKeys = new Map<number, Set<string>>();
  forEachField(bytes, start, end, (no, s, e) => {
    if (found !== undefined) return;
    const field = desc.fields.find((f) => f.number === no);
    if (!field) return;
    const p = path === "" ? field.name : `${path}.${field.name}`;
    if (field.fieldKind === "scalar" && field.scalar === ScalarType.STRING) found = bom(bytes, s, e, p);
    else if (
      field.fieldKind === "list" &&
      field.listKind === "scalar" &&
      field.scalar === ScalarType.STRING
    ) {
      found = bom(bytes, s, e, p);
    } else if (field.fieldKind === "message") found = walkMessage(field.message, bytes, s, e, p);
    else if (field.fieldKind === "map") {
      // A map is stored in a plain object too: a `__proto__` key is lost the same way.
      const valueDesc = field.mapKind === "message" ? field.message : undefined;
      const stringValues = field.mapKind === "scalar" && field.scalar === ScalarType.STRING;
      const keys = mapKeys.get(no) ?? new Set<string>();
      mapKeys.set(no, keys);
      forEachField(bytes, s, e, (entryNo, vs, ve) => {
        if (found !== undefined) return;
        if (entryNo === 1) found = key(bytes, vs, ve, p) ?? repeated(keys, text(bytes, vs, ve), p);
        else if (entryNo === 2 && valueDesc) found = walkMessage(valueDesc, bytes, vs, ve, p);
        else if (entryNo === 2 && stringValues) found = bom(bytes, vs, ve, p);
      });
    }
  });
  return found;
}

/** Struct: `map<string, Value> fields = 1`, each entry a message of key = 1, value = 2. */
function walkStruct(bytes: Uint8Array, start: number, end: number, path: string): Loss | undefined {
  let found: Loss | undefined;
  const keys = new Set<string>();
  forEachField(bytes, start, end, (no, s, e) => {
    if (found !== undefined || no !== 1) return;
    let name = "";
    let value: [number, number] | undefined;
    forEachField(bytes, s, e, (entryNo, ks, ke) => {
      if (found !== undefined) return;
      if (entryNo === 1) {
        found = key(bytes, ks, ke, path);
        name = text(bytes, ks, ke);
      } else if (entryNo === 2) value = [ks, ke];
    });
    // (An entry without a key has key "".)
    found ??= repeated(keys, name, path);
    if (found === undefined && value) found = walkValue(bytes, value[0], value[1], `${path}.${name}`);
  });
  return found;
}

/** Value: string_value = 3; struct_value = 5 and list_value = 6 hold further values. */
function walkValue(bytes: Uint8Array, start: number, end: number, path: string): Loss | undefined {
  let found: Loss | undefined;
  forEachField(bytes, start, end, (no, s, e) => {
    if (found !== undefined) return;
    if (no === 3) found = bom(bytes, s, e, path);
    else if (no === 5) found = walkStruct(bytes, s, e, path);
    else if (no === 6) found = walkList(bytes, s, e, path);
  });
  return found;
}

/** ListValue: `repeated Value values = 1`. */
function walkList(bytes: Uint8Array, start: number, end: number, path: string): Loss | undefined {
  let found: Loss | undefined;
  let i = 0;
  forEachField(bytes, start, end, (no, s, e) => {
    if (no !== 1) return;
    if (found === undefined) found = walkValue(bytes, s, e, `${path}[${i}]`);
    i++;
  });
  return found;
}

/** A map or Struct key: `__proto__`, or one starting with a BOM. */
function key(bytes: Uint8Array, start: number, end: number, path: string): Loss | undefined {
  if (end - start === PROTO_KEY.length && text(bytes, start, end) === "__proto__") {
    return { kind: "proto-key", path: `${path}.__proto__` };
  }
  return bom(bytes, start, end, `${path} (a key)`);
}

/** A key already in `keys` (recorded otherwise). */
function repeated(keys: Set<string>, name: string, path: string): Loss | undefined {
  if (keys.has(name)) return { kind: "duplicate-key", path: `${path}.${name}` };
  keys.add(name);
  return undefined;
}

function bom(bytes: Uint8Array, start: number, end: number, path: string): Loss | undefined {
  return end - start >= 3 && bytes[start] === 0xef && bytes[start + 1] === 0xbb && bytes[start + 2] === 0xbf
    ? { kind: "bom", path }
    : undefined;
}

function text(bytes: Uint8Array, start: number, end: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString("utf8");
}

/**
 * Calls `fn` for each length-delimited field in bytes[start, end) with its number and content
 * range; other wire types are skipped. Malformed bytes end the walk (the decoder, which ran
 * first, has accepted these bytes, so that does not happen in practice).
 */
function forEachField(
  bytes: Uint8Array,
  start: number,
  end: number,
  fn: (no: number, start: number, end: number) => void,
): void {
  let pos = start;
  const varint = (): number => {
    let result = 0;
    let shift = 1;
    for (;;) {
      if (pos >= end) return -1;
      const b = bytes[pos++]!;
      result += (b & 0x7f) * shift;
      if (b < 0x80) return result;
      shift *= 128;
      if (shift > 2 ** 63) return -1;
    }
  };
  while (pos < end) {
    const tag = varint();
    if (tag < 0) return;
    const wire = tag % 8;
    const no = Math.floor(tag / 8);
    if (wire === 0) {
      if (varint() < 0) return;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const len = varint();
      if (len < 0 || pos + len > end) return;
      fn(no, pos, pos + len);
      pos += len;
    } else return; // groups (3, 4) are not used by our messages
  }
}
