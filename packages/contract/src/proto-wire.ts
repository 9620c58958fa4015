import { isUtf8 } from "node:buffer";
import {
  type DescMessage,
  type JsonObject,
  type JsonValue,
  protoInt64,
  ScalarType,
} from "@bufbuild/protobuf";
import { CALL_TYPE_FIELDS, type CallType, type ContractCall, isCallType } from "./call.js";
import { BatchCallSchema } from "./gen/hookpost/v1/ingest_pb.js";
import { MAX_BATCH_BYTES, MAX_CALL_BYTES, MAX_OBJECT_DEPTH } from "./limits.js";
import { batchCountProblem, validateCall } from "./rules.js";
import { fromProtoTimestamp } from "./timestamp.js";

/*
 * The fast path of gRPC call requests: from the request bytes straight to contract calls, in
 * one walk, without protobuf-es's reflection objects and its Struct -> JSON conversion (about
 * half of ingest's CPU per call). It only takes the requests it reads exactly as protobuf-es
 * (`fromBinary` then `fromProtoCall`) would, and that break no rule: canonical encodings of
 * known fields, strictly nested, each singular field once. Anything else (unknown or repeated
 * fields, other wire types, malformed or non-UTF-8 bytes, a `__proto__` or a byte order mark
 * anywhere, a size or rule violation) makes it give up, and the caller takes the full path
 * (protobuf-es, proto-rules.ts), which produces the refusal. So it has no error messages of its
 * own, and accepts nothing the full path refuses; test/contract/proto-wire.test.ts checks both
 * paths agree on random requests.
 */

/** Thrown, stackless, when the fast path gives up. */
const GIVE_UP: unique symbol = Symbol("take the full path");

const PROTO_KEY = Buffer.from("__proto__");
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** The calls of a BatchRequest, when the fast path takes it and they break no rule; else undefined. */
export function acceptedBatchCalls(bytes: Uint8Array, maxCalls: number): ContractCall[] | undefined {
  if (bytes.length > MAX_BATCH_BYTES) return undefined;
  const r = reader(bytes);
  if (!r) return undefined;
  try {
    const calls = r.batch();
    if (batchCountProblem(calls.length, maxCalls) !== undefined) return undefined;
    for (const c of calls) if (validateCall(c, "proto").length > 0) return undefined;
    return calls;
  } catch (err) {
    if (err === GIVE_UP) return undefined;
    throw err;
  }
}

/** The call of a unary request of this type, when the fast path takes it and it breaks no rule. */
export function acceptedCall(type: CallType, bytes: Uint8Array): ContractCall | undefined {
  if (bytes.length > MAX_CALL_BYTES) return undefined;
  const r = reader(bytes);
  if (!r) return undefined;
  try {
    const call = r.call(CALLS[type], 0, bytes.length);
    return validateCall(call, "proto").length > 0 ? undefined : call;
  } catch (err) {
    if (err === GIVE_UP) return undefined;
    throw err;
  }
}

function reader(bytes: Uint8Array): WireReader | undefined {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  // What protobuf-es would lose (proto-bytes.ts findLoss): rare, left to the full path.
  if (buf.indexOf(PROTO_KEY) >= 0 || buf.indexOf(BOM) >= 0) return undefined;
  return new WireReader(buf);
}

/** How a call field is read: a string, a Struct, a Timestamp or the integrations map. */
enum Kind {
  String = 0,
  Struct = 1,
  Timestamp = 2,
  BoolMap = 3,
}

interface CallField {
  /** The ContractCall property (the field's JSON name). */
  key: keyof ContractCall;
  kind: Kind;
  /** The only tag byte accepted for it (field number and wire type 2, canonical). */
  tag: number;
}

interface CallSpec {
  type: CallType;
  /** By field number. */
  fields: Array<CallField | undefined>;
  /** Creates the call with every field unset, in the shape fromProtoCall gives. */
  empty: () => ContractCall;
}

const COMMON_KEYS: Array<keyof ContractCall> = [
  "messageId",
  "userId",
  "anonymousId",
  "timestamp",
  "context",
  "integrations",
];

/** From the descriptors, so that a field added to the .proto fails here (tests) until taught. */
function callSpec(type: CallType, desc: DescMessage): CallSpec {
  const fields: Array<CallField | undefined> = [];
  const keys = [...COMMON_KEYS, ...CALL_TYPE_FIELDS[type]];
  for (const f of desc.fields) {
    const key = f.localName as keyof ContractCall;
    if (!keys.includes(key) || f.number > 15)
      throw new Error(`proto-wire: ${desc.typeName}.${f.name} is not read`);
    let kind: Kind;
    if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) kind = Kind.String;
    else if (f.fieldKind === "message" && f.message.typeName === "google.protobuf.Struct") kind = Kind.Struct;
    else if (f.fieldKind === "message" && f.message.typeName === "google.protobuf.Timestamp")
      kind = Kind.Timestamp;
    else if (
      f.fieldKind === "map" &&
      f.mapKey === ScalarType.STRING &&
      f.mapKind === "scalar" &&
      f.scalar === ScalarType.BOOL
    )
      kind = Kind.BoolMap;
    else throw new Error(`proto-wire: ${desc.typeName}.${f.name} has a kind it cannot read`);
    fields[f.number] = { key, kind, tag: (f.number << 3) | 2 };
  }
  if (fields.filter(Boolean).length !== keys.length)
    throw new Error(`proto-wire: ${desc.typeName} lacks fields`);
  const extras = fields
    .filter((f): f is CallField => f !== undefined && !COMMON_KEYS.includes(f.key))
    .map((f) => [f.key, f.kind === Kind.String ? "" : undefined] as const);
  const empty = (): ContractCall => {
    const c: ContractCall = {
      type,
      messageId: "",
      userId: "",
      anonymousId: "",
      timestamp: undefined,
      context: undefined,
      integrations: {},
    };
    for (const [key, value] of extras) set(c, key, value);
    return c;
  };
  return { type, fields, empty };
}

function set(call: ContractCall, key: keyof ContractCall, value: unknown): void {
  (call as unknown as Record<string, unknown>)[key] = value;
}

const CALLS = {} as Record<CallType, CallSpec>;
/** By BatchCall oneof member number. */
const MEMBERS: Array<CallSpec | undefined> = [];
for (const f of BatchCallSchema.fields) {
  if (f.fieldKind !== "message" || !isCallType(f.localName) || f.number > 15) {
    throw new Error(`proto-wire: BatchCall.${f.name} is not a call type it reads`);
  }
  CALLS[f.localName] = callSpec(f.localName, f.message);
  MEMBERS[f.number] = CALLS[f.localName];
}

/** Wire tags (one byte each) of the well-known types read here. */
const TAG_1_LEN = 0x0a; // field 1, length-delimited: BatchRequest.calls, Struct.fields, map keys, ListValue.values
const TAG_2_LEN = 0x12; // field 2, length-delimited: a Struct entry's Value
const TAG_1_VARINT = 0x08; // Timestamp.seconds, Value.null_value
const TAG_2_VARINT = 0x10; // Timestamp.nanos, a map entry's bool
const VALUE_NUMBER = 0x11; // field 2, 64-bit
const VALUE_STRING = 0x1a;
const VALUE_BOOL = 0x20;
const VALUE_STRUCT = 0x2a;
const VALUE_LIST = 0x32;

const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);

class WireReader {
  readonly #buf: Buffer;
  #pos = 0;
  /** The low and high 32 bits of the last varint64 read. */
  #lo = 0;
  #hi = 0;

  constructor(buf: Buffer) {
    this.#buf = buf;
  }

  /** BatchRequest: `repeated BatchCall calls = 1`, each with exactly one member. */
  batch(): ContractCall[] {
    const out: ContractCall[] = [];
    const end = this.#buf.length;
    while (this.#pos < end) {
      if (this.#buf[this.#pos++] !== TAG_1_LEN) throw GIVE_UP;
      const callEnd = this.#length(end);
      if (this.#pos >= callEnd) throw GIVE_UP;
      const tag = this.#buf[this.#pos++]!;
      const spec = (tag & 7) === 2 ? MEMBERS[tag >> 3] : undefined;
      if (spec === undefined) throw GIVE_UP;
      const memberEnd = this.#length(callEnd);
      if (memberEnd !== callEnd || memberEnd - this.#pos > MAX_CALL_BYTES) throw GIVE_UP;
      out.push(this.call(spec, this.#pos, memberEnd));
    }
    return out;
  }

  /** A call request in bytes[start, end). */
  call(spec: CallSpec, start: number, end: number): ContractCall {
    const call = spec.empty();
    this.#pos = start;
    let seen = 0;
    while (this.#pos < end) {
      const tag = this.#buf[this.#pos++]!;
      const field = spec.fields[tag >> 3];
      if (field === undefined || field.tag !== tag) throw GIVE_UP;
      const fieldEnd = this.#length(end);
      const bit = 1 << (tag >> 3);
      if (field.kind === Kind.BoolMap) {
        this.#boolEntry(call.integrations!, fieldEnd);
        continue;
      }
      // protobuf-es merges repeated messages and keeps the last string: left to it.
      if (seen & bit) throw GIVE_UP;
      seen |= bit;
      switch (field.kind) {
        case Kind.String:
          set(call, field.key, this.#string(fieldEnd));
          break;
        case Kind.Struct:
          set(call, field.key, this.#struct(fieldEnd, 1));
          break;
        case Kind.Timestamp:
          call.timestamp = this.#timestamp(fieldEnd);
          break;
      }
    }
    return call;
  }

  /** A varint length (at most 5 bytes) whose content ends within `limit`; returns the content end. */
  #length(limit: number): number {
    const buf = this.#buf;
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      if (this.#pos >= limit || shift > 28) throw GIVE_UP;
      const b = buf[this.#pos++]!;
      len += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    const end = this.#pos + len;
    if (end > limit) throw GIVE_UP;
    return end;
  }

  /** A varint of up to 10 bytes ending within `limit`, into #lo/#hi (protobuf-es's varint64read). */
  #varint64(limit: number): void {
    const buf = this.#buf;
    let lo = 0;
    let hi = 0;
    let b = 0x80;
    for (let shift = 0; shift < 28 && b >= 0x80; shift += 7) {
      if (this.#pos >= limit) throw GIVE_UP;
      b = buf[this.#pos++]!;
      lo |= (b & 0x7f) << shift;
    }
    if (b >= 0x80) {
      if (this.#pos >= limit) throw GIVE_UP;
      b = buf[this.#pos++]!;
      lo |= (b & 0x0f) << 28;
      hi = (b & 0x70) >> 4;
      for (let shift = 3; shift <= 31 && b >= 0x80; shift += 7) {
        if (this.#pos >= limit) throw GIVE_UP;
        b = buf[this.#pos++]!;
        // Bits past the 64th (a 10th byte above 1) are left to protobuf-es.
        if (shift === 31 && b > 1) throw GIVE_UP;
        hi |= (b & 0x7f) << shift;
      }
      if (b >= 0x80) throw GIVE_UP;
    }
    this.#lo = lo;
    this.#hi = hi;
  }

  /** UTF-8 text up to `end`; invalid UTF-8 (which protobuf-es refuses) gives up. */
  #string(end: number): string {
    const buf = this.#buf;
    const start = this.#pos;
    this.#pos = end;
    if (end - start < 16) {
      // Short ASCII (most keys and ids) is cheaper in JavaScript than a native call.
      let out = "";
      for (let i = start; i < end; i++) {
        const c = buf[i]!;
        if (c >= 0x80) return utf8(buf, start, end);
        out += String.fromCharCode(c);
      }
      return out;
    }
    return utf8(buf, start, end);
  }

  /** google.protobuf.Struct up to `end`, as JSON (protobuf-es's wktStructToLocal). */
  #struct(end: number, depth: number): JsonObject {
    const out: JsonObject = {};
    while (this.#pos < end) {
      if (this.#buf[this.#pos++] !== TAG_1_LEN) throw GIVE_UP;
      const entryEnd = this.#length(end);
      let key = "";
      let value: JsonValue = null;
      while (this.#pos < entryEnd) {
        const tag = this.#buf[this.#pos++];
        if (tag === TAG_1_LEN) key = this.#string(this.#length(entryEnd));
        else if (tag === TAG_2_LEN) value = this.#value(this.#length(entryEnd), depth);
        else throw GIVE_UP;
      }
      // A repeated key (protobuf-es keeps the last) is refused by the full path.
      if (Object.hasOwn(out, key)) throw GIVE_UP;
      out[key] = value;
    }
    return out;
  }

  /** google.protobuf.Value up to `end` (one kind; none is null, as protobuf-es reads it). */
  #value(end: number, depth: number): JsonValue {
    if (this.#pos === end) return null;
    const tag = this.#buf[this.#pos++];
    let value: JsonValue;
    switch (tag) {
      case TAG_1_VARINT:
        this.#varint64(end);
        value = null;
        break;
      case VALUE_NUMBER:
        if (this.#pos + 8 > end) throw GIVE_UP;
        for (let i = 0; i < 8; i++) f64Bytes[i] = this.#buf[this.#pos++]!;
        value = f64[0]!;
        break;
      case VALUE_STRING:
        value = this.#string(this.#length(end));
        break;
      case VALUE_BOOL:
        this.#varint64(end);
        value = this.#lo !== 0 || this.#hi !== 0;
        break;
      case VALUE_STRUCT:
        if (depth >= MAX_OBJECT_DEPTH) throw GIVE_UP;
        value = this.#struct(this.#length(end), depth + 1);
        break;
      case VALUE_LIST:
        if (depth >= MAX_OBJECT_DEPTH) throw GIVE_UP;
        value = this.#list(this.#length(end), depth + 1);
        break;
      default:
        throw GIVE_UP;
    }
    // A second kind (protobuf-es keeps the last, merging messages) is left to it.
    if (this.#pos !== end) throw GIVE_UP;
    return value;
  }

  /** google.protobuf.ListValue up to `end`. */
  #list(end: number, depth: number): JsonValue[] {
    const out: JsonValue[] = [];
    while (this.#pos < end) {
      if (this.#buf[this.#pos++] !== TAG_1_LEN) throw GIVE_UP;
      out.push(this.#value(this.#length(end), depth));
    }
    return out;
  }

  /** One `map<string, bool>` entry up to `end` (key "" and false when left out). */
  #boolEntry(map: Record<string, boolean>, end: number): void {
    let key = "";
    let value = false;
    while (this.#pos < end) {
      const tag = this.#buf[this.#pos++];
      if (tag === TAG_1_LEN) key = this.#string(this.#length(end));
      else if (tag === TAG_2_VARINT) {
        this.#varint64(end);
        value = this.#lo !== 0 || this.#hi !== 0;
      } else throw GIVE_UP;
    }
    if (Object.hasOwn(map, key)) throw GIVE_UP;
    map[key] = value;
  }

  /** google.protobuf.Timestamp up to `end`, in contract form. */
  #timestamp(end: number): ContractCall["timestamp"] {
    let seconds = 0n;
    let nanos = 0;
    let seen = 0;
    while (this.#pos < end) {
      const tag = this.#buf[this.#pos++]!;
      if ((tag !== TAG_1_VARINT && tag !== TAG_2_VARINT) || seen & tag) throw GIVE_UP;
      seen |= tag;
      this.#varint64(end);
      if (tag === TAG_1_VARINT) seconds = protoInt64.dec(this.#lo, this.#hi) as bigint;
      else nanos = this.#lo | 0;
    }
    return fromProtoTimestamp(seconds, nanos);
  }
}

/** Text of valid UTF-8; protobuf-es refuses invalid UTF-8, which the decoder marks with U+FFFD. */
function utf8(buf: Buffer, start: number, end: number): string {
  const text = buf.toString("utf8", start, end);
  if (text.includes("\ufffd") && !isUtf8(buf.subarray(start, end))) throw GIVE_UP;
  return text;
}
