import type { ContractCall } from "./call.js";
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
  switch (call.case) {
    case "identify":
      out.traits = call.value.traits;
      break;
    case "track":
      out.event = call.value.event;
      out.properties = call.value.properties;
      break;
    case "page":
      out.name = call.value.name;
      out.category = call.value.category;
      out.properties = call.value.properties;
      break;
    case "screen":
      out.name = call.value.name;
      break;
    case "group":
      out.groupId = call.value.groupId;
      out.traits = call.value.traits;
      break;
    case "alias":
      out.previousId = call.value.previousId;
      break;
  }
  return out;
}
