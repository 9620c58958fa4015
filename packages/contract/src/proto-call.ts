import { CALL_TYPE_FIELDS, type ContractCall } from "./call.js";
import type { BatchCall } from "./gen/hookpost/v1/ingest_pb.js";
import { fromProtoTimestamp } from "./timestamp.js";

/** One call as gRPC decodes it, tagged with its type: the shape of a BatchCall's oneof. */
export type ProtoCall = Exclude<BatchCall["call"], { case: undefined }>;

/** A decoded protobuf call in contract form (proto3's "" stays "": not sent). */
export function fromProtoCall(call: ProtoCall): ContractCall {
  const v = call.value;
  const out: ContractCall = {
    type: call.case,
    messageId: v.messageId,
    userId: v.userId,
    anonymousId: v.anonymousId,
    timestamp: v.timestamp ? fromProtoTimestamp(v.timestamp.seconds, v.timestamp.nanos) : undefined,
    context: v.context,
    integrations: v.integrations,
  };
  // The type's own fields: protobuf-es gives them the contract's names and JSON shapes.
  const from = v as Partial<Record<keyof ContractCall, unknown>>;
  const to = out as unknown as Record<string, unknown>;
  for (const key of CALL_TYPE_FIELDS[call.case]) to[key] = from[key];
  return out;
}
