import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport } from "@connectrpc/connect-node";
import { AdminService, CreateDestinationRequestSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, useHarness } from "../ingest/harness.js";

// AdminService over Connect: the Connect library decodes a request before any handler (or the
// token check) runs, outside our gRPC decoder. What gRPC refuses (bytes that are not the message,
// invalid UTF-8, a `__proto__` map key the JavaScript decoder would lose: proto-keys.test.ts)
// is refused here too with INVALID_ARGUMENT, never silently changed, and no body answers 500.

const h = useHarness({ config: { httpAddress: "127.0.0.1:0" } });
let sourceId: string;

async function post(
  method: string,
  body: string | Uint8Array,
  contentType = "application/json",
  auth = true,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${h.httpBase}/hookpost.v1.AdminService/${method}`, {
    method: "POST",
    headers: {
      "content-type": contentType,
      ...(auth ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {}),
      ...headers,
    },
    body,
  });
  const text = await res.text();
  return { status: res.status, text, json: text.startsWith("{") ? JSON.parse(text) : undefined };
}

const destinationNames = async () => (await h.admin.listDestinations({})).destinations.map((d) => d.name);

beforeAll(async () => {
  sourceId = (await h.source("web")).id;
});

describe("Connect request bodies", () => {
  it("refuses a __proto__ header name, which decoding would drop, and creates nothing", async () => {
    const body = JSON.stringify({
      destination: {
        name: "proto-header",
        sourceIds: [sourceId],
        urls: ["https://hooks.example.com/in"],
        headers: { "X-Team": "a" },
      },
    }).replace('"X-Team":"a"', '"X-Team":"a","__proto__":"b"');
    const res = await post("CreateDestination", body);
    expect(res.status, res.text).toBe(400);
    expect(res.json.code).toBe("invalid_argument");
    expect(res.json.message).toContain('destination.headers["__proto__"]');
    expect(await destinationNames()).not.toContain("proto-header");
    // The same key written with JSON escapes.
    const escaped = await post("CreateDestination", body.replace('"__proto__"', '"\\u005f_proto__"'));
    expect(escaped.status, escaped.text).toBe(400);
    expect(escaped.json.message).toContain('destination.headers["__proto__"]');
    expect(await destinationNames()).not.toContain("proto-header");
  });

  it("refuses a body that is not UTF-8 rather than storing U+FFFD in its place", async () => {
    const body = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
    const res = await post("CreateSource", body);
    expect(res.status, res.text).toBe(400);
    expect(res.json.code).toBe("invalid_argument");
    expect(res.json.message).toMatch(/UTF-8/);
    expect((await h.admin.listSources({})).sources.map((s) => s.name)).not.toContain("caf\uFFFD");
  });

  it("answers binary bytes that are not the message with INVALID_ARGUMENT, never 500, token or not", async () => {
    for (const auth of [true, false]) {
      const res = await post("ListSources", new Uint8Array([0xff, 0xff, 0xff]), "application/proto", auth);
      expect(res.status, res.text).toBe(400);
      expect(res.json.code).toBe("invalid_argument");
      expect(res.json.message).toContain("not a valid hookpost.v1.ListSourcesRequest");
    }
  });

  it("refuses a __proto__ header name in a binary request too", async () => {
    // Object literals cannot hold the key: encoded with a stand-in of the same length, swapped in.
    const bytes = Buffer.from(
      toBinary(
        CreateDestinationRequestSchema,
        create(CreateDestinationRequestSchema, {
          destination: {
            name: "proto-header-binary",
            sourceIds: [sourceId],
            urls: ["https://hooks.example.com/in"],
            headers: { "X-Team": "a", __PROTO__: "b" },
          },
        }),
      ),
    );
    bytes.write("__proto__", bytes.indexOf("__PROTO__"));
    const res = await post("CreateDestination", bytes, "application/proto");
    expect(res.status, res.text).toBe(400);
    expect(res.json.message).toContain('destination.headers["__proto__"]');
    expect(await destinationNames()).not.toContain("proto-header-binary");
  });

  it("still serves binary and gzipped requests that decode", async () => {
    const client = createClient(
      AdminService,
      createConnectTransport({
        baseUrl: h.httpBase,
        httpVersion: "1.1",
        useBinaryFormat: true,
        sendCompression: compressionGzip,
        compressMinBytes: 0,
        interceptors: [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
            return next(req);
          },
        ],
      }),
    );
    const created = await client.createSource({ name: "binary, gzipped" });
    expect(created.source?.name).toBe("binary, gzipped");
    const gzipped = await post(
      "ListSources",
      gzipSync(Buffer.from([0xff, 0xff])),
      "application/proto",
      true,
      {
        "content-encoding": "gzip",
      },
    );
    expect(gzipped.status, gzipped.text).toBe(400);
  });

  it("still takes ordinary JSON, unicode included", async () => {
    const res = await post("CreateSource", JSON.stringify({ name: "café ☕" }));
    expect(res.status, res.text).toBe(200);
    expect(res.json.source.name).toBe("café ☕");
  });
});
