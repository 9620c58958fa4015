import { CALL_STRING_FIELDS, type ContractCall } from "./call.js";
import { MAX_BATCH_BYTES, MAX_CALL_BYTES } from "./limits.js";
import { messageIdProblem } from "./message-id.js";
import { bomProblem, objectViolation, protoKeyProblem, startsWithBom } from "./objects.js";
import { timestampProblem } from "./timestamp.js";
import { type FieldNaming, fieldName, type Violation } from "./violation.js";

/**
 * The rules of one call (SPEC section 3), for every transport. `prefix` goes before every field
 * name: "" for a single call, `calls[3].` (gRPC) or `batch[3].` (HTTP) inside a batch. Returns
 * every violation found, none when valid. Size limits are checked by the transport, on the bytes
 * that arrived.
 */
export function validateCall(call: ContractCall, naming: FieldNaming, prefix = ""): Violation[] {
  // No closures here: this runs for every call of every batch.
  const out: Violation[] = [];
  if (call.messageId !== "") {
    const problem = messageIdProblem(call.messageId);
    if (problem) bad(out, prefix, naming, "messageId", problem);
  }
  for (const field of CALL_STRING_FIELDS) {
    const v = call[field];
    // (A message id's BOM is reported by the message-id rule.)
    if (field !== "messageId" && v && startsWithBom(v)) {
      bad(out, prefix, naming, field, bomProblem(fieldName(field, naming)));
    }
  }
  if (call.type === "alias") {
    if (call.userId === "") {
      bad(
        out,
        prefix,
        naming,
        "userId",
        `an alias call needs the ${fieldName("userId", naming)} to alias to`,
      );
    }
    if (!call.previousId) {
      bad(
        out,
        prefix,
        naming,
        "previousId",
        `an alias call needs the ${fieldName("previousId", naming)} to alias from`,
      );
    }
  } else if (call.userId === "" && call.anonymousId === "") {
    const article = call.type === "identify" ? "an" : "a";
    bad(
      out,
      prefix,
      naming,
      "userId",
      `${article} ${call.type} call needs a ${fieldName("userId", naming)} or an ${fieldName("anonymousId", naming)}`,
    );
  }
  if (call.type === "track" && !call.event)
    bad(out, prefix, naming, "event", "a track call needs an event name");
  if (call.type === "group" && !call.groupId) {
    bad(out, prefix, naming, "groupId", `a group call needs a ${fieldName("groupId", naming)}`);
  }

  if (call.timestamp !== undefined) {
    const problem = timestampProblem(call.timestamp);
    if (problem) bad(out, prefix, naming, "timestamp", problem);
  }
  if (call.integrations !== undefined) {
    if (Object.hasOwn(call.integrations, "__proto__")) {
      bad(out, prefix, naming, "integrations", protoKeyProblem("integrations.__proto__"));
    }
    const k = Object.keys(call.integrations).find(startsWithBom);
    if (k !== undefined) bad(out, prefix, naming, "integrations", bomProblem(`integrations.${k} (a key)`));
  }
  checkObject(out, prefix, call, "context");
  if (call.type === "identify" || call.type === "group") checkObject(out, prefix, call, "traits");
  if (call.type === "track" || call.type === "page") checkObject(out, prefix, call, "properties");
  return out;
}

function bad(
  out: Violation[],
  prefix: string,
  naming: FieldNaming,
  field: string,
  description: string,
): void {
  out.push({ field: prefix + fieldName(field, naming), description });
}

function checkObject(
  out: Violation[],
  prefix: string,
  call: ContractCall,
  field: "context" | "traits" | "properties",
): void {
  const value = call[field];
  if (value === undefined) return;
  // The objects' names are the same in both namings; a bad number is named by its own path.
  const problem = objectViolation(value, field);
  if (problem) out.push({ field: prefix + problem.field, description: problem.description });
}

/** Why a batch's call count is refused (none, or more than `maxCalls`), or undefined. */
export function batchCountProblem(count: number, maxCalls: number): string | undefined {
  if (count === 0) return "a batch needs at least one call";
  if (count > maxCalls) return `the batch has ${count} calls; at most ${maxCalls} are allowed, split it`;
  return undefined;
}

/** The description of a call larger than the limit. */
export function callSizeProblem(type: string, bytes: number, limit: number, unit: string): string {
  return `the ${type} call is ${bytes} bytes ${unit}; at most ${limit} (${limit / 1024} KiB) are allowed`;
}

/** The description of a batch larger than the limit. */
export function batchSizeProblem(bytes: number, limit: number, unit: string): string {
  return `the batch is ${bytes} bytes ${unit}; at most ${limit} (${limit / 1024} KiB) are allowed, split it`;
}

/** One call of a batch as measured by its transport: its type and its own size in bytes. */
export interface CallSize {
  type: string;
  bytes: number;
}

/**
 * The size limits of a batch, counted as stored (SPEC section 12): each call's own size plus
 * `copiedBytes`, the batch-level fields copied into every call (Segment's `context` and
 * `integrations`), is at most MAX_CALL_BYTES, and the sum over the calls is at most
 * MAX_BATCH_BYTES, as is the request itself (`requestBytes`, as it arrived). So shared fields
 * cannot multiply what one request stores: a request stores at most MAX_BATCH_BYTES of calls (plus
 * each call's stamp), whatever it sent. `field(i)` names call i (`batch[3]`, `calls[3]`),
 * `batchField` the batch; `unit` says how sizes were measured.
 */
export function batchSizeViolations(
  calls: readonly CallSize[],
  copiedBytes: number,
  requestBytes: number,
  unit: string,
  field: (i: number) => string,
  batchField: string,
): Violation[] {
  const out: Violation[] = [];
  const how =
    copiedBytes > 0
      ? `${unit}, with the batch's ${copiedBytes} bytes of context and integrations copied in`
      : unit;
  let total = 0;
  for (let i = 0; i < calls.length; i++) {
    const size = calls[i]!.bytes + copiedBytes;
    total += size;
    if (size > MAX_CALL_BYTES) {
      out.push({ field: field(i), description: callSizeProblem(calls[i]!.type, size, MAX_CALL_BYTES, how) });
    }
  }
  if (Math.max(total, requestBytes) > MAX_BATCH_BYTES) {
    const description =
      total >= requestBytes
        ? batchSizeProblem(total, MAX_BATCH_BYTES, how)
        : batchSizeProblem(requestBytes, MAX_BATCH_BYTES, unit);
    out.unshift({ field: batchField, description });
  }
  return out;
}
