import { randomBytes, randomInt } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@grpc/grpc-js";
import { adminMetadata, writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { AdminService, CreateDestinationRequestSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { BatchRequestSchema, IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, type IngestClient, rawCall, rawClient, useHarness } from "./harness.js";

const h = useHarness();
let raw: Client;
let src: { id: string; writeKey: string; client: IngestClient };

beforeAll(async () => {
  raw = rawClient(h.address);
  src = await h.source("fuzz");
});

afterAll(async () => {
  raw?.close();
});

const paths = [
  ...IngestService.methods.map((m) => `/${IngestService.typeName}/${m.name}`),
  ...AdminService.methods.map((m) => `/${AdminService.typeName}/${m.name}`),
];

/** Valid encodings to mutate: a rich batch and a destination. */
function seeds(): Uint8Array[] {
  const batch = create(BatchRequestSchema, {
    calls: [
      {
        call: {
          case: "track",
          value: {
            messageId: "seed-1",
            userId: "u",
            event: "E",
            timestamp: timestampFromDate(new Date()),
            properties: { a: [1, "b", { c: null, d: true }] },
            integrations: { All: false },
          },
        },
      },
      { call: { case: "alias", value: { userId: "u", previousId: "p" } } },
      { call: { case: "group", value: { userId: "u", groupId: "g", traits: { n: 1.5 } } } },
    ],
  });
  const dest = create(CreateDestinationRequestSchema, {
    destination: {
      name: "d",
      sourceIds: [src.id],
      urls: ["https://example.com/h"],
      headers: { "X-A": "b" },
      sharedSecret: "s",
    },
  });
  return [toBinary(BatchRequestSchema, batch), toBinary(CreateDestinationRequestSchema, dest)];
}

function mutate(bytes: Uint8Array): Uint8Array {
  const out = Buffer.from(bytes);
  const kind = randomInt(3);
  if (kind === 0) {
    for (let i = 0; i < 1 + randomInt(4); i++) out[randomInt(out.length)] = randomInt(256);
    return out;
  }
  if (kind === 1) return out.subarray(0, randomInt(out.length));
  return Buffer.concat([out, randomBytes(1 + randomInt(16))]);
}

describe("garbage input", () => {
  it("answers 500 random and mutated requests with a status, and keeps serving", async () => {
    const metadatas = [
      {},
      writeKeyMetadata(src.writeKey),
      adminMetadata(ADMIN_TOKEN),
      { authorization: `Basic ${randomBytes(12).toString("base64")}` },
    ];
    const [batchSeed, destSeed] = seeds();
    const requests = Array.from({ length: 500 }, (_, i) => {
      const md = metadatas[i % metadatas.length]!;
      if (i % 2 === 0) {
        return { path: paths[randomInt(paths.length)]!, body: randomBytes(randomInt(200)), md };
      }
      return i % 4 === 1
        ? {
            path: `/${IngestService.typeName}/Batch`,
            body: mutate(batchSeed!),
            md: writeKeyMetadata(src.writeKey),
          }
        : {
            path: `/${AdminService.typeName}/CreateDestination`,
            body: mutate(destSeed!),
            md: adminMetadata(ADMIN_TOKEN),
          };
    });
    const codes = new Map<number, number>();
    for (let i = 0; i < requests.length; i += 50) {
      const results = await Promise.all(
        requests.slice(i, i + 50).map((r) => rawCall(raw, r.path, r.body, r.md).then((res) => ({ r, res }))),
      );
      for (const { r, res } of results) {
        codes.set(res.code, (codes.get(res.code) ?? 0) + 1);
        expect(
          [Code.INTERNAL, Code.UNKNOWN, Code.DEADLINE_EXCEEDED],
          `${r.path}: ${res.details}`,
        ).not.toContain(res.code);
        if (res.code !== Code.OK) expect(res.details, r.path).not.toBe("");
      }
    }
    expect([...codes.values()].reduce((a, b) => a + b, 0)).toBe(500);
    expect(codes.get(Code.INVALID_ARGUMENT)).toBeGreaterThan(0);

    // Still alive and serving.
    const { messageId } = await src.client.track({ userId: "u", event: "after the storm" });
    expect(await h.find(messageId)).toBeDefined();
    expect((await h.admin.listSources({})).sources.length).toBeGreaterThan(0);
  });
});
