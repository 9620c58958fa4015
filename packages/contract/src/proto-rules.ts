import type { BatchRequest } from "./gen/hookpost/v1/ingest_pb.js";
import { MAX_CALL_BYTES } from "./limits.js";
import { bomProblem, protoKeyProblem } from "./objects.js";
import { batchCallRanges, callSchemaByType, callSchemaOf, findLoss, type Loss } from "./proto-bytes.js";
import { fromProtoCall, type ProtoCall } from "./proto-call.js";
import {
  batchCountProblem,
  batchSizeViolations,
  type CallSize,
  callSizeProblem,
  validateCall,
} from "./rules.js";
import type { Violation } from "./violation.js";

const ENCODED = "encoded";

/**
 * The contract over gRPC for one call RPC: `bytes` is the request as it arrived (its size is the
 * call's size; `__proto__` keys are looked for in it, as decoding dropped them).
 */
export function protoCallViolations(call: ProtoCall, bytes: Uint8Array): Violation[] {
  const out: Violation[] = [];
  if (bytes.length > MAX_CALL_BYTES) {
    out.push({
      field: call.case,
      description: callSizeProblem(call.case, bytes.length, MAX_CALL_BYTES, ENCODED),
    });
  }
  const loss = findLoss(callSchemaByType(call.case), bytes);
  if (loss) out.push(lossViolation(loss, ""));
  out.push(...validateCall(fromProtoCall(call), "proto"));
  return out;
}

/** The contract over gRPC for a Batch (all-or-nothing), `bytes` as above. */
export function protoBatchViolations(req: BatchRequest, bytes: Uint8Array, maxCalls: number): Violation[] {
  const countProblem = batchCountProblem(req.calls.length, maxCalls);
  if (countProblem) return [{ field: "calls", description: countProblem }];
  const ranges = batchCallRanges(bytes);
  // Sizes of the calls as encoded; a Batch copies nothing into its calls.
  const sizes: CallSize[] = req.calls.map((bc, i) => ({
    type: bc.call.case ?? "empty",
    bytes: ranges[i] ? ranges[i]!.end - ranges[i]!.start : 0,
  }));
  const out = batchSizeViolations(sizes, 0, bytes.length, ENCODED, (i) => `calls[${i}]`, "calls");
  req.calls.forEach((bc, i) => {
    const prefix = `calls[${i}]`;
    if (bc.call.case === undefined) {
      out.push({
        field: prefix,
        description: "the call is empty: set one of identify, track, page, screen, group or alias",
      });
      return;
    }
    const range = ranges[i];
    const schema = range && callSchemaOf(range.no);
    const loss = schema && findLoss(schema, bytes, range.start, range.end);
    if (loss) out.push(lossViolation(loss, `${prefix}.`));
    out.push(...validateCall(fromProtoCall(bc.call), "proto", `${prefix}.`));
  });
  return out;
}

/** A loss the decoder would cause, as a violation on the top-level field it is in. */
function lossViolation(loss: Loss, prefix: string): Violation {
  const field = prefix + loss.path.split(/[.[ ]/)[0]!;
  const description =
    loss.kind === "proto-key"
      ? protoKeyProblem(loss.path)
      : loss.kind === "bom"
        ? bomProblem(loss.path)
        : `${loss.path} is a key written more than once in one map; decoding would keep only the last value silently, so repeated keys are refused`;
  return { field, description };
}
