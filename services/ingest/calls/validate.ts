import { type JsonValue, toBinary } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { type BatchRequest, BatchRequestSchema } from "../../../gen/hookpost/v1/ingest_pb.js";
import type { FieldViolation } from "../../../lib/grpc/mod.js";
import { hasControlChar } from "../text.js";
import { CALL_SCHEMAS, type Call } from "./call.js";
import { MAX_BATCH_BYTES, MAX_CALL_BYTES, MAX_MESSAGE_ID_CHARS, MAX_OBJECT_DEPTH } from "./limits.js";

// google.protobuf.Timestamp's valid range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
const MIN_SECONDS = -62_135_596_800n;
const MAX_SECONDS = 253_402_300_799n;

/**
 * The rules of one call (SPEC section 3). `prefix` goes before every field name: "" for a
 * single call, `calls[3].` inside a batch. Returns every violation found, none when valid.
 * The size limit is checked apart (callSizeProblem).
 */
export function validateCall(call: Call, prefix = ""): FieldViolation[] {
  const out: FieldViolation[] = [];
  const bad = (field: string, description: string) => out.push({ field: prefix + field, description });
  const c = call.value;

  const idChars = [...c.messageId].length;
  if (idChars > MAX_MESSAGE_ID_CHARS) {
    bad("message_id", `is ${idChars} characters long; at most ${MAX_MESSAGE_ID_CHARS} are allowed`);
  } else if (hasControlChar(c.messageId)) {
    bad("message_id", "must not contain control characters (such as line breaks)");
  }

  if (call.case === "alias") {
    if (c.userId === "") bad("user_id", "an alias call needs the user_id to alias to");
    if (call.value.previousId === "") bad("previous_id", "an alias call needs the previous_id to alias from");
  } else if (c.userId === "" && c.anonymousId === "") {
    const article = call.case === "identify" ? "an" : "a";
    bad("user_id", `${article} ${call.case} call needs a user_id or an anonymous_id`);
  }
  if (call.case === "track" && call.value.event === "") bad("event", "a track call needs an event name");
  if (call.case === "group" && call.value.groupId === "") bad("group_id", "a group call needs a group_id");

  if (c.timestamp) {
    const problem = timestampProblem(c.timestamp);
    if (problem) bad("timestamp", problem);
  }

  checkObject(c.context, "context", bad);
  if (call.case === "identify" || call.case === "group") checkObject(call.value.traits, "traits", bad);
  if (call.case === "track" || call.case === "page") checkObject(call.value.properties, "properties", bad);
  return out;
}

/** A call's size in bytes, encoded as protobuf on its own. */
export function encodedCallSize(call: Call): number {
  return toBinary(CALL_SCHEMAS[call.case], call.value).length;
}

export function callSizeProblem(call: Call): string | undefined {
  const size = encodedCallSize(call);
  return size > MAX_CALL_BYTES
    ? `the ${call.case} call is ${size} bytes encoded; at most ${MAX_CALL_BYTES} (32 KiB) are allowed`
    : undefined;
}

/** The rules of a whole Batch: non-empty, at most 500 KiB, and every call valid. */
export function validateBatch(req: BatchRequest): FieldViolation[] {
  if (req.calls.length === 0) {
    return [{ field: "calls", description: "a batch needs at least one call" }];
  }
  const out: FieldViolation[] = [];
  const size = toBinary(BatchRequestSchema, req).length;
  if (size > MAX_BATCH_BYTES) {
    out.push({
      field: "calls",
      description: `the batch is ${size} bytes encoded; at most ${MAX_BATCH_BYTES} (500 KiB) are allowed, split it`,
    });
  }
  req.calls.forEach((bc, i) => {
    if (bc.call.case === undefined) {
      out.push({
        field: `calls[${i}]`,
        description: "the call is empty: set one of identify, track, page, screen, group or alias",
      });
    } else {
      const problem = callSizeProblem(bc.call);
      if (problem) out.push({ field: `calls[${i}]`, description: problem });
      out.push(...validateCall(bc.call, `calls[${i}].`));
    }
  });
  return out;
}

function timestampProblem(ts: Timestamp): string | undefined {
  if (ts.seconds < MIN_SECONDS || ts.seconds > MAX_SECONDS) {
    return "is out of range: it must lie between the years 0001 and 9999";
  }
  if (!Number.isInteger(ts.nanos) || ts.nanos < 0 || ts.nanos > 999_999_999) {
    return "has invalid nanos: they must be between 0 and 999999999";
  }
  return undefined;
}

/**
 * A Struct arrives as a JsonObject; reject what JSON cannot carry faithfully: NaN and
 * Infinity, absurd nesting, and a `__proto__` key (which a plain object cannot hold).
 */
function checkObject(
  value: JsonValue | undefined,
  field: string,
  bad: (field: string, description: string) => void,
): void {
  if (value === undefined) return;
  const walk = (v: JsonValue, path: string, depth: number): boolean => {
    if (typeof v === "number" && !Number.isFinite(v)) {
      bad(field, `${path} is ${v}; numbers must be finite (JSON has no NaN or Infinity)`);
      return false;
    }
    if (v === null || typeof v !== "object") return true;
    if (depth > MAX_OBJECT_DEPTH) {
      bad(field, `nests deeper than ${MAX_OBJECT_DEPTH} levels`);
      return false;
    }
    if (Array.isArray(v)) return v.every((item, i) => walk(item, `${path}[${i}]`, depth + 1));
    if (Object.getPrototypeOf(v) !== Object.prototype) {
      bad(field, `${path} has a key named "__proto__", which is not allowed`);
      return false;
    }
    return Object.entries(v).every(([k, item]) => walk(item, `${path}.${k}`, depth + 1));
  };
  walk(value, field, 1);
}
