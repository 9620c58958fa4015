import { type DescField, type JsonObject, type JsonValue, ScalarType } from "@bufbuild/protobuf";
import { BatchCallSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import type { CallType } from "./calls.js";

/*
 * Protobuf encoding of one call as a BatchRequest frame (see wire.ts), written by hand because
 * protobuf-es's generic toBinary spends ~75 µs per call on google.protobuf.Struct (it converts
 * JSON to Struct messages through reflection), which capped enqueueing at ~12 000 calls/s. This
 * writes the same bytes (a test compares them with toBinary) in a few µs. The layout is read from
 * the generated descriptors, so a change to the .proto is followed, or refused at load if it adds
 * a kind of field this encoder does not write.
 */

/** A call ready to encode: proto field local names; timestamp as a Date; Structs as JSON. */
export type CallFields = Record<string, string | Date | JsonObject | Record<string, boolean> | undefined>;

type Kind = "string" | "timestamp" | "struct" | "boolMap";
interface FieldPlan {
  name: string;
  number: number;
  kind: Kind;
}
interface CallPlan {
  /** Field number of this call type in the BatchCall oneof. */
  number: number;
  fields: FieldPlan[];
}

const LEN = 2; // wire type: length-delimited
const VARINT = 0;
const I64 = 1;
/** Field number of `calls` in BatchRequest. */
const CALLS_FIELD = 1;

export class CallTooLargeError extends Error {}

const PLANS = buildPlans();

function buildPlans(): Record<CallType, CallPlan> {
  const plans: Partial<Record<string, CallPlan>> = {};
  for (const member of BatchCallSchema.fields) {
    if (member.fieldKind !== "message") throw new Error(`BatchCall.${member.name} is not a message`);
    const fields = [...member.message.fields].sort((a, b) => a.number - b.number).map(planField);
    plans[member.localName] = { number: member.number, fields };
  }
  return plans as Record<CallType, CallPlan>;
}

function planField(f: DescField): FieldPlan {
  const plan = (kind: Kind) => ({ name: f.localName, number: f.number, kind });
  if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) return plan("string");
  if (f.fieldKind === "message" && f.message.typeName === "google.protobuf.Timestamp")
    return plan("timestamp");
  if (f.fieldKind === "message" && f.message.typeName === "google.protobuf.Struct") return plan("struct");
  if (
    f.fieldKind === "map" &&
    f.mapKey === ScalarType.STRING &&
    f.mapKind === "scalar" &&
    f.scalar === ScalarType.BOOL
  ) {
    return plan("boolMap");
  }
  throw new Error(`the client cannot encode ${f.parent.typeName}.${f.name}; update client/call-encoder.ts`);
}

/**
 * One scratch buffer for all encodes (encoding is synchronous and calls no user code). Its size
 * bounds the work spent on an oversized call: writing stops as soon as the limit is passed.
 */
let buf = Buffer.alloc(0);
let pos = 0;
let end = 0;

/**
 * Encodes a call as a BatchRequest frame; throws CallTooLargeError as soon as the BatchCall
 * exceeds `maxCallBytes`.
 */
export function encodeFrame(type: CallType, fields: CallFields, maxCallBytes: number): Uint8Array {
  // Room for the frame header and the slack of the worst-case checks in varint().
  const capacity = maxCallBytes + 16;
  if (buf.length !== capacity) buf = Buffer.alloc(capacity);
  pos = 0;
  end = capacity;
  const plan = PLANS[type];
  const call = beginLen(CALLS_FIELD);
  const request = beginLen(plan.number);
  for (const f of plan.fields) {
    const v = fields[f.name];
    if (v === undefined) continue;
    switch (f.kind) {
      case "string":
        // proto3 strings are absent when empty.
        if (v !== "") writeString(f.number, v as string);
        break;
      case "timestamp":
        writeTimestamp(f.number, v as Date);
        break;
      case "struct": {
        const at = beginLen(f.number);
        writeStructFields(v as JsonObject);
        endLen(at);
        break;
      }
      case "boolMap":
        for (const key of Object.keys(v as object)) {
          const at = beginLen(f.number);
          writeString(1, key);
          tag(2, VARINT);
          byte((v as Record<string, boolean>)[key] ? 1 : 0);
          endLen(at);
        }
        break;
    }
  }
  endLen(request);
  if (pos - call - 1 > maxCallBytes) throw new CallTooLargeError();
  endLen(call);
  return keep(buf.subarray(0, pos));
}

/*
 * Frames are copied into shared slabs rather than one ArrayBuffer each: a small ArrayBuffer costs
 * more in bookkeeping than a frame's bytes. The queue is FIFO, so a slab is freed soon after its
 * last frame is sent.
 */
const SLAB_BYTES = 64 * 1024;
let slab = new Uint8Array(0);
let slabPos = 0;

function keep(bytes: Uint8Array): Uint8Array {
  if (slabPos + bytes.length > slab.length) {
    slab = new Uint8Array(Math.max(SLAB_BYTES, bytes.length));
    slabPos = 0;
  }
  const frame = slab.subarray(slabPos, slabPos + bytes.length);
  frame.set(bytes);
  slabPos += bytes.length;
  return frame;
}

function writeStructFields(obj: JsonObject): void {
  for (const key of Object.keys(obj)) {
    const entry = beginLen(1);
    writeString(1, key);
    const value = beginLen(2);
    writeValue(obj[key]!);
    endLen(value);
    endLen(entry);
  }
}

/** google.protobuf.Value: a oneof, so its member is written even when zero. */
function writeValue(v: JsonValue): void {
  if (v === null) {
    tag(1, VARINT);
    byte(0);
  } else if (typeof v === "number") {
    tag(2, I64);
    ensure(8);
    buf.writeDoubleLE(v, pos);
    pos += 8;
  } else if (typeof v === "string") {
    writeString(3, v);
  } else if (typeof v === "boolean") {
    tag(4, VARINT);
    byte(v ? 1 : 0);
  } else if (Array.isArray(v)) {
    const list = beginLen(6);
    for (const item of v) {
      const at = beginLen(1);
      writeValue(item);
      endLen(at);
    }
    endLen(list);
  } else {
    const struct = beginLen(5);
    writeStructFields(v);
    endLen(struct);
  }
}

function writeTimestamp(no: number, date: Date): void {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms - seconds * 1000) * 1_000_000;
  const at = beginLen(no);
  if (seconds !== 0) {
    tag(1, VARINT);
    if (seconds < 0) writeNegativeInt64(seconds);
    else varint(seconds);
  }
  if (nanos !== 0) {
    tag(2, VARINT);
    varint(nanos);
  }
  endLen(at);
}

function writeString(no: number, s: string): void {
  tag(no, LEN);
  const n = Buffer.byteLength(s, "utf8");
  varint(n);
  ensure(n);
  pos += buf.write(s, pos, n, "utf8");
}

function tag(no: number, wireType: number): void {
  varint((no << 3) | wireType);
}

/** Starts a length-delimited field; one byte is reserved for the length (enough below 128). */
function beginLen(no: number): number {
  tag(no, LEN);
  byte(0);
  return pos - 1;
}

/** Writes the length; a longer varint moves the field's bytes to make room. */
function endLen(at: number): void {
  const len = pos - at - 1;
  if (len < 0x80) {
    buf[at] = len;
    return;
  }
  const extra = varintSize(len) - 1;
  ensure(extra);
  buf.copyWithin(at + 1 + extra, at + 1, pos);
  pos = at;
  varint(len);
  pos += len;
}

function byte(b: number): void {
  ensure(1);
  buf[pos++] = b;
}

/** Non-negative integers up to 2^53. */
function varint(n: number): void {
  ensure(10);
  while (n > 0x7f) {
    buf[pos++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[pos++] = n;
}

/** int64 below zero: ten bytes of two's complement, as every protobuf writer does. */
function writeNegativeInt64(n: number): void {
  ensure(10);
  let v = BigInt.asUintN(64, BigInt(n));
  while (v > 0x7fn) {
    buf[pos++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  buf[pos++] = Number(v);
}

function varintSize(n: number): number {
  let size = 1;
  while (n > 0x7f) {
    n = Math.floor(n / 0x80);
    size++;
  }
  return size;
}

function ensure(n: number): void {
  if (pos + n > end) throw new CallTooLargeError();
}
