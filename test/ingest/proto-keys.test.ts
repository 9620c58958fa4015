import { create, type DescMessage, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { type Client, Metadata } from "@grpc/grpc-js";
import { adminMetadata, writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import {
  CreateDestinationRequestSchema,
  UpdateDestinationRequestSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { SyncComputedTraitRequestSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, rawCall, rawClient, useHarness } from "./harness.js";

/**
 * A `__proto__` map key is lost by the JavaScript decoder (it sets the object's prototype), so
 * it must be refused with INVALID_ARGUMENT, never silently dropped. Object literals cannot hold
 * such a key either, so the requests are encoded with a stand-in key of the same length that is
 * swapped in the bytes.
 */
const STAND_IN = "__PROTO__";

function withProtoKey<D extends DescMessage>(schema: D, init: MessageInitShape<D>): Buffer {
  const bytes = Buffer.from(toBinary(schema, create(schema, init)));
  const at = bytes.indexOf(STAND_IN);
  expect(at).toBeGreaterThanOrEqual(0);
  bytes.write("__proto__", at);
  return bytes;
}

const h = useHarness();
let raw: Client;
let source: { id: string; writeKey: string };

beforeAll(async () => {
  raw = rawClient(h.address);
  source = await h.source("web");
});

afterAll(async () => {
  raw?.close();
});

describe("__proto__ as a map key", () => {
  it("is refused as a destination header name, on create and on update", async () => {
    const destination = {
      name: "hook",
      sourceIds: [source.id],
      urls: ["https://hooks.example.com/in"],
      enabled: true,
      headers: { "X-Team": "a", [STAND_IN]: "b" },
    };
    const before = (await h.admin.listDestinations({})).destinations.length;
    const created = await rawCall(
      raw,
      "/hookpost.v1.AdminService/CreateDestination",
      withProtoKey(CreateDestinationRequestSchema, { destination }),
      adminMetadata(ADMIN_TOKEN),
    );
    expect(created.code, created.details).toBe(Code.INVALID_ARGUMENT);
    expect(created.details).toContain('destination.headers["__proto__"]');
    expect((await h.admin.listDestinations({})).destinations).toHaveLength(before);

    // The same destination without it is fine; an update adding it is refused and changes nothing.
    const ok = await h.admin.createDestination({
      destination: { ...destination, headers: { "X-Team": "a" } },
    });
    const id = ok.destination!.id;
    const updated = await rawCall(
      raw,
      "/hookpost.v1.AdminService/UpdateDestination",
      withProtoKey(UpdateDestinationRequestSchema, {
        destination: { ...destination, id },
        updateMask: { paths: ["headers"] },
      }),
      adminMetadata(ADMIN_TOKEN),
    );
    expect(updated.code, updated.details).toBe(Code.INVALID_ARGUMENT);
    expect(updated.details).toContain('headers["__proto__"]');
    expect((await h.admin.getDestination({ id })).destination!.headers).toEqual({ "X-Team": "a" });
  });

  it("is refused as a computed-trait user id, and nothing is published", async () => {
    const before = await h.messageCount();
    const first = withProtoKey(SyncComputedTraitRequestSchema, {
      traitName: "LTV",
      values: {
        alice: { kind: { case: "numberValue", value: 1 } },
        [STAND_IN]: { kind: { case: "numberValue", value: 2 } },
      },
    });
    const status = await rawClientStream(raw, "/hookpost.v1.IngestService/SyncComputedTrait", [first], {
      ...writeKeyMetadata(source.writeKey),
    });
    expect(status.code, status.details).toBe(Code.INVALID_ARGUMENT);
    expect(status.details).toContain('values["__proto__"]');
    expect(await h.messageCount()).toBe(before);
  });

  it("is refused only as a key: the text elsewhere is fine", async () => {
    const ok = await h.admin.createDestination({
      destination: {
        name: "__proto__",
        sourceIds: [source.id],
        urls: ["https://hooks.example.com/__proto__"],
        enabled: true,
        headers: { "X-Proto": "__proto__" },
      },
    });
    expect(ok.destination!.headers).toEqual({ "X-Proto": "__proto__" });
  });
});

/** A client-streaming call with raw request bytes; resolves with the status. */
function rawClientStream(
  client: Client,
  path: string,
  messages: Buffer[],
  metadata: Record<string, string>,
): Promise<{ code: number; details: string }> {
  const md = new Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    const call = client.makeClientStreamRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      md,
      { deadline: Date.now() + 30_000 },
      (err) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: "" }),
    );
    for (const m of messages) call.write(m);
    call.end();
  });
}
