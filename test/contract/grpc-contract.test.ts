/**
 * Issue 10 finding 5 over gRPC: a Batch call-count cap, the 9999-12-31 timestamp, and `__proto__`
 * keys (and leading BOMs) that the protobuf decoder drops silently, refused from the bytes as sent.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { BatchRequestSchema, TrackRequestSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { beforeAll, describe, expect, it } from "vitest";
import { failure, fields, type IngestClient, rawCall, rawClient, useHarness } from "../ingest/harness.js";

const h = useHarness({ config: { maxBatchCalls: 50 } });
let src: { id: string; writeKey: string; client: IngestClient };

beforeAll(async () => {
  src = await h.source("web");
});

/** A Struct holding one string entry, encoded by hand (protobuf-es cannot build a `__proto__` key). */
function structWith(key: string, value: string): Buffer {
  const k = Buffer.from(key);
  const v = Buffer.concat([Buffer.from([0x1a, Buffer.byteLength(value)]), Buffer.from(value)]);
  const entry = Buffer.concat([Buffer.from([0x0a, k.length]), k, Buffer.from([0x12, v.length]), v]);
  return Buffer.concat([Buffer.from([0x0a, entry.length]), entry]);
}

function trackBytes(extra: Buffer): Buffer {
  const base = toBinary(TrackRequestSchema, create(TrackRequestSchema, { userId: "u", event: "E" }));
  return Buffer.concat([Buffer.from(base), extra]);
}

/** A Track request whose Struct field (tag byte: 0x42 properties, 0x2a context) holds `struct`. */
function trackWithStruct(tag: number, struct: Buffer): Buffer {
  return trackBytes(Buffer.concat([Buffer.from([tag, struct.length]), struct]));
}

describe("gRPC: what the decoder would lose is refused", () => {
  it("a __proto__ key in properties or context: INVALID_ARGUMENT naming the field, nothing stored", async () => {
    const client = rawClient(h.address);
    h.clients.push(client);
    const md = { authorization: writeKeyMetadata(src.writeKey).authorization! };
    const before = await h.messageCount();
    const props = structWith("__proto__", "x");
    // TrackRequest.properties is field 8; context is field 5.
    const r = await rawCall(client, "/hookpost.v1.IngestService/Track", trackWithStruct(0x42, props), md);
    expect(r.code).toBe(Code.INVALID_ARGUMENT);
    expect(r.details).toContain('properties: has a key named "__proto__" (properties.__proto__)');
    const ctx = await rawCall(client, "/hookpost.v1.IngestService/Track", trackWithStruct(0x2a, props), md);
    expect(ctx.details).toContain("context: has a key named");
    // In a Batch, named by index.
    const call = trackBytes(Buffer.concat([Buffer.from([0x42, props.length]), props]));
    const batchCall = Buffer.concat([Buffer.from([0x12, call.length]), call]);
    const req = Buffer.concat([
      Buffer.from(
        toBinary(
          BatchRequestSchema,
          create(BatchRequestSchema, {
            calls: [{ call: { case: "track", value: { userId: "u", event: "E" } } }],
          }),
        ),
      ),
      Buffer.from([0x0a, batchCall.length]),
      batchCall,
    ]);
    const b = await rawCall(client, "/hookpost.v1.IngestService/Batch", req, md);
    expect(b.code).toBe(Code.INVALID_ARGUMENT);
    expect(b.details).toContain("calls[1].properties");
    expect(await h.messageCount()).toBe(before);
  });

  it("a key written twice in one Struct (decoding keeps the last) is refused, not changed (issue 22)", async () => {
    const client = rawClient(h.address);
    h.clients.push(client);
    const md = { authorization: writeKeyMetadata(src.writeKey).authorization! };
    const before = await h.messageCount();
    // Two entries with the key "plan" in one properties Struct (field 8).
    const props = Buffer.concat([structWith("plan", "free"), structWith("plan", "pro")]);
    const r = await rawCall(client, "/hookpost.v1.IngestService/Track", trackWithStruct(0x42, props), md);
    expect(r.code).toBe(Code.INVALID_ARGUMENT);
    expect(r.details).toContain("properties: properties.plan is a key written more than once");
    // Two different keys are fine.
    const nested = Buffer.concat([structWith("plan", "free"), structWith("tier", "pro")]);
    const ok = await rawCall(client, "/hookpost.v1.IngestService/Track", trackWithStruct(0x42, nested), md);
    expect(ok.code, ok.details).toBe(Code.OK);
    expect(await h.messageCount()).toBe(before + 1);
  });

  it("a string starting with U+FEFF (which decoding strips) is refused, not changed", async () => {
    for (const call of [
      { userId: "\ufeffu", event: "E" },
      { userId: "u", event: "\ufeffE" },
      { userId: "u", event: "E", properties: { a: "\ufeffx" } },
      { userId: "u", event: "E", messageId: "\ufeffcli-1" },
    ]) {
      const err = await failure(src.client.track(call));
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.message).toContain("byte order mark");
    }
  });
});

describe("gRPC: limits and timestamps", () => {
  it("a Batch carries at most MAX_BATCH_CALLS calls", async () => {
    const call = { call: { case: "track" as const, value: { userId: "u", event: "E" } } };
    const err = await failure(src.client.batch({ calls: Array.from({ length: 51 }, () => call) }));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(fields(err)).toEqual(["calls"]);
    expect(err.message).toContain("51 calls; at most 50");
    const ok = await src.client.batch({ calls: Array.from({ length: 50 }, () => call) });
    expect(ok.messageIds).toHaveLength(50);
  });

  it("9999-12-31T23:59:59.999999999Z is stored as 9999-12-31T23:59:59.999Z (truncated, never +010000)", async () => {
    const { messageId } = await src.client.track({
      userId: "u",
      event: "E",
      timestamp: { seconds: 253_402_300_799n, nanos: 999_999_999 },
    });
    expect((await h.find(messageId))!.call.timestamp).toBe("9999-12-31T23:59:59.999Z");
  });
});
