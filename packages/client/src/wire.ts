import { create, fromBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import {
  type BatchCall,
  BatchCallSchema,
  type BatchRequest,
  BatchRequestSchema,
} from "@hookpost/contract/gen/hookpost/v1/ingest_pb";

/*
 * Calls are encoded once, at enqueue, into "frames" (call-encoder.ts): the bytes one call adds to
 * a BatchRequest (tag of field 1, length, encoded BatchCall). The frame length is the exact cost of
 * the call in a batch, so batches are cut under the size limit without re-measuring, and the queue
 * holds compact bytes instead of object graphs.
 */

/**
 * A BatchRequest whose calls are the given frames, sent as they are: protobuf-es writes a
 * message's preserved unknown fields verbatim, so each frame goes out as the repeated `calls`
 * entry it encodes, and the receiver decodes an ordinary BatchRequest.
 */
export function batchRequestOf(frames: readonly Uint8Array[]): BatchRequest {
  const request = create(BatchRequestSchema);
  // The unknown-field data of a length-delimited field is the bytes after its tag.
  request.$unknown = frames.map((f) => ({ no: 1, wireType: WireType.LengthDelimited, data: f.subarray(1) }));
  return request;
}

/** The BatchCall a frame carries (for reporting failed calls). */
export function decodeFrame(frame: Uint8Array): BatchCall {
  return fromBinary(BatchRequestSchema, frame).calls[0] ?? create(BatchCallSchema);
}
