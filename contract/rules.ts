import { CALL_STRING_FIELDS, type ContractCall } from "./call.js";
import { messageIdProblem } from "./message-id.js";
import { bomProblem, objectProblem, protoKeyProblem, startsWithBom } from "./objects.js";
import { timestampProblem } from "./timestamp.js";
import { type FieldNaming, fieldName, type Violation } from "./violation.js";

/**
 * The rules of one call (SPEC section 3), for every transport. `prefix` goes before every field
 * name: "" for a single call, `calls[3].` (gRPC) or `batch[3].` (HTTP) inside a batch. Returns
 * every violation found, none when valid. Size limits are checked by the transport, on the bytes
 * that arrived.
 */
export function validateCall(call: ContractCall, naming: FieldNaming, prefix = ""): Violation[] {
  const out: Violation[] = [];
  const bad = (field: string, description: string) =>
    out.push({ field: prefix + fieldName(field, naming), description });
  const name = (field: string) => fieldName(field, naming);

  if (call.messageId !== "") {
    const problem = messageIdProblem(call.messageId);
    if (problem) bad("messageId", problem);
  }
  for (const field of CALL_STRING_FIELDS) {
    const v = call[field];
    // (A message id's BOM is reported by the message-id rule.)
    if (field !== "messageId" && v && startsWithBom(v)) bad(field, bomProblem(name(field)));
  }
  if (call.type === "alias") {
    if (call.userId === "") bad("userId", `an alias call needs the ${name("userId")} to alias to`);
    if (!call.previousId) bad("previousId", `an alias call needs the ${name("previousId")} to alias from`);
  } else if (call.userId === "" && call.anonymousId === "") {
    const article = call.type === "identify" ? "an" : "a";
    bad("userId", `${article} ${call.type} call needs a ${name("userId")} or an ${name("anonymousId")}`);
  }
  if (call.type === "track" && !call.event) bad("event", "a track call needs an event name");
  if (call.type === "group" && !call.groupId) bad("groupId", `a group call needs a ${name("groupId")}`);

  if (call.timestamp !== undefined) {
    const problem = timestampProblem(call.timestamp);
    if (problem) bad("timestamp", problem);
  }
  const check = (field: "context" | "traits" | "properties") => {
    const value = call[field];
    if (value === undefined) return;
    const problem = objectProblem(value, field);
    if (problem) bad(field, problem);
  };
  if (call.integrations !== undefined) {
    if (Object.hasOwn(call.integrations, "__proto__")) {
      bad("integrations", protoKeyProblem("integrations.__proto__"));
    }
    const k = Object.keys(call.integrations).find(startsWithBom);
    if (k !== undefined) bad("integrations", bomProblem(`integrations.${k} (a key)`));
  }
  check("context");
  if (call.type === "identify" || call.type === "group") check("traits");
  if (call.type === "track" || call.type === "page") check("properties");
  return out;
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
