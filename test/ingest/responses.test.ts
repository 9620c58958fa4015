import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { encodeIds } from "@hookpost/api";
import { BatchResponseSchema, TrackResponseSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { describe, expect, it } from "vitest";

describe("responses written directly", () => {
  it("are the bytes protobuf-es writes, for a Batch and for one call", () => {
    const ids = [randomUUID(), "a", "~".repeat(100), "x-1!"];
    expect(Buffer.from(encodeIds(ids)!)).toEqual(
      Buffer.from(toBinary(BatchResponseSchema, create(BatchResponseSchema, { messageIds: ids }))),
    );
    expect(Buffer.from(encodeIds(["m-1"])!)).toEqual(
      Buffer.from(toBinary(TrackResponseSchema, create(TrackResponseSchema, { messageId: "m-1" }))),
    );
  });

  it("leave ids that are not short ASCII to protobuf-es", () => {
    expect(encodeIds(["é"])).toBeUndefined();
    expect(encodeIds(["\ud800"])).toBeUndefined();
    expect(encodeIds(["x".repeat(128)])).toBeUndefined();
  });
});
