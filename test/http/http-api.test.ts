import { request } from "node:http";
import { gzipSync } from "node:zlib";
import { MAX_BATCH_BYTES } from "@hookpost/contract";
import { EVENTS_STREAM } from "@hookpost/core";
import { beforeAll, describe, expect, it } from "vitest";
import { counterValue } from "../e2e/helpers.js";
import { HOSTILE_MESSAGE_IDS } from "../helpers/hostile-ids.js";
import { type IngestClient, useHarness } from "../ingest/harness.js";
import { basic, post, rawExchange } from "./helpers.js";

const h = useHarness({
  config: {
    httpAddress: "127.0.0.1:0",
    // Short, so the slow-client tests finish quickly; far above what a loaded machine needs.
    http: { headersTimeoutMs: 3_000, requestTimeoutMs: 4_000 },
  },
});
let src: { id: string; writeKey: string; client: IngestClient };
let base: string;
let httpAddress: string;

beforeAll(async () => {
  src = await h.source("web");
  httpAddress = h.ingest.httpAddress!;
  base = `http://${httpAddress}`;
});

const ok = { status: 200, body: { success: true } };

async function stored(messageId: string) {
  const found = await h.find(messageId);
  expect(found, `stored ${messageId}`).toBeDefined();
  return found!;
}

/** Posts `body` with the source's write key, expects 400, and returns the first field violation. */
async function refused(path: string, body: string) {
  const r = await post(base, path, body, { writeKey: src.writeKey });
  expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(400);
  return r.body.violations?.[0];
}

describe("the six call routes", () => {
  it("store the same call as gRPC would, answering 200 {success:true}", async () => {
    const key = src.writeKey;
    const at = "2026-11-21T09:30:00.000Z";
    const common = { userId: "u1", anonymousId: "a1", timestamp: at, context: { ip: "10.0.0.1" } };
    const calls: [string, Record<string, unknown>][] = [
      ["/v1/identify", { ...common, messageId: "h-identify", traits: { plan: "pro" } }],
      ["/v1/track", { ...common, messageId: "h-track", event: "Signed Up", properties: { n: 1 } }],
      [
        "/v1/page",
        { ...common, messageId: "h-page", name: "Home", category: "Docs", properties: { path: "/" } },
      ],
      ["/v1/screen", { ...common, messageId: "h-screen", name: "Main" }],
      ["/v1/group", { ...common, messageId: "h-group", groupId: "g1", traits: { size: 3 } }],
      ["/v1/alias", { userId: "u1", previousId: "a1", messageId: "h-alias", timestamp: at }],
    ];
    for (const [path, body] of calls)
      expect(await post(base, path, body, { writeKey: key })).toMatchObject(ok);

    // The same calls over gRPC: the stored records differ only in message id and receive time.
    const ts = { seconds: BigInt(Date.parse(at) / 1000), nanos: 0 };
    const g = { userId: "u1", anonymousId: "a1", timestamp: ts, context: { ip: "10.0.0.1" } };
    await src.client.identify({ ...g, messageId: "g-identify", traits: { plan: "pro" } });
    await src.client.track({ ...g, messageId: "g-track", event: "Signed Up", properties: { n: 1 } });
    await src.client.page({
      ...g,
      messageId: "g-page",
      name: "Home",
      category: "Docs",
      properties: { path: "/" },
    });
    await src.client.screen({ ...g, messageId: "g-screen", name: "Main" });
    await src.client.group({ ...g, messageId: "g-group", groupId: "g1", traits: { size: 3 } });
    await src.client.alias({ userId: "u1", previousId: "a1", messageId: "g-alias", timestamp: ts });
    for (const type of ["identify", "track", "page", "screen", "group", "alias"]) {
      const viaHttp = await stored(`h-${type}`);
      const viaGrpc = await stored(`g-${type}`);
      const strip = (c: Record<string, unknown>) => ({ ...c, messageId: undefined, receivedAt: undefined });
      expect(strip(viaHttp.call as never)).toEqual(strip(viaGrpc.call as never));
      expect(viaHttp.subject).toBe(viaGrpc.subject);
      expect(viaHttp.msgId).toBe(`${src.id}:h-${type}`);
      expect(viaHttp.call.sourceId).toBe(src.id);
    }
  });

  it("normalise every timestamp form SDKs write to UTC with milliseconds", async () => {
    const forms: Record<string, string> = {
      "2026-11-21T15:00:00+05:30": "2026-11-21T09:30:00.000Z",
      "2026-11-21T09:30:00Z": "2026-11-21T09:30:00.000Z",
      "2026-11-21T09:30:00.5+0000": "2026-11-21T09:30:00.500Z",
      "2026-11-21T04:30:00.123456-05:00": "2026-11-21T09:30:00.123Z",
      "2026-11-21T09:30:00.123456789Z": "2026-11-21T09:30:00.123Z",
      "2026-11-21 09:30:00.1+00:00": "2026-11-21T09:30:00.100Z",
      "9999-12-31T23:59:59.999999999Z": "9999-12-31T23:59:59.999Z",
      "0001-01-01T00:00:00Z": "0001-01-01T00:00:00.000Z",
    };
    let i = 0;
    for (const [sent, want] of Object.entries(forms)) {
      const id = `ts-${i++}`;
      const r = await post(
        base,
        "/v1/track",
        { userId: "u", event: "E", messageId: id, timestamp: sent },
        { writeKey: src.writeKey },
      );
      expect(r, sent).toMatchObject(ok);
      expect((await stored(id)).call.timestamp, sent).toBe(want);
    }
    for (const bad of [
      "9999-12-31T23:00:00-05:00",
      "0001-01-01T00:30:00+01:00",
      "2026-02-30T00:00:00Z",
      "yesterday",
      "2026-11-21T09:30:00",
    ]) {
      const r = await post(
        base,
        "/v1/track",
        { userId: "u", event: "E", timestamp: bad },
        { writeKey: src.writeKey },
      );
      expect(r.status, bad).toBe(400);
      expect(r.body.violations?.[0]?.field).toBe("timestamp");
    }
  });

  it("take the write key from the body, ignore unknown keys, and answer keep-alive", async () => {
    const r = await post(base, "/v1/track", {
      writeKey: src.writeKey,
      userId: "u",
      event: "E",
      messageId: "in-body",
      futureKey: { x: 1 },
    });
    expect(r).toMatchObject(ok);
    expect((await stored("in-body")).call.sourceId).toBe(src.id);
    // Two requests on one connection, both answered.
    const body = JSON.stringify({ userId: "u", event: "E" });
    const req = `POST /v1/track HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic(src.writeKey)}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const both = await rawExchange(httpAddress, [req + req], { timeoutMs: 8_000 });
    expect(both.text.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(2);
  });

  it("accept gzip bodies", async () => {
    const r = await post(
      base,
      "/v1/batch",
      { batch: [{ type: "track", userId: "u", event: "Zipped", messageId: "gz-1" }] },
      { writeKey: src.writeKey, gzip: true },
    );
    expect(r).toMatchObject(ok);
    expect((await stored("gz-1")).call.event).toBe("Zipped");
  });
});

describe("batch and import", () => {
  it("merge batch-level context and integrations into each call (the call's own keys win)", async () => {
    for (const path of ["/v1/batch", "/v1/import"]) {
      const r = await post(
        base,
        path,
        {
          batch: [
            { type: "track", userId: "u", event: "A", messageId: `${path}-m1`, context: { ip: "1.1.1.1" } },
            {
              type: "identify",
              userId: "u",
              messageId: `${path}-m2`,
              context: { library: { name: "own" } },
              integrations: { Webhooks: false },
            },
          ],
          context: { library: { name: "analytics-go", version: "3.0.0" } },
          integrations: { All: true, Other: { option: 1 } },
          sentAt: "2026-11-21T09:30:00Z",
        },
        { writeKey: src.writeKey },
      );
      expect(r).toMatchObject(ok);
      const m1 = (await stored(`${path}-m1`)).call;
      expect(m1.context).toEqual({ library: { name: "analytics-go", version: "3.0.0" }, ip: "1.1.1.1" });
      expect(m1.integrations).toEqual({ All: true, Other: true });
      const m2 = (await stored(`${path}-m2`)).call;
      expect(m2.context).toEqual({ library: { name: "own" } });
      expect(m2.integrations).toEqual({ All: true, Other: true, Webhooks: false });
    }
  });

  it("store a repeated message id once, across two posts", async () => {
    const before = await h.messageCount();
    const call = { type: "track", userId: "u", event: "Twice", messageId: "dedup-1" };
    expect(await post(base, "/v1/batch", { batch: [call] }, { writeKey: src.writeKey })).toMatchObject(ok);
    expect(await post(base, "/v1/track", call, { writeKey: src.writeKey })).toMatchObject(ok);
    // And once more over gRPC: one dedup key whichever transport.
    await src.client.track({ userId: "u", event: "Twice", messageId: "dedup-1" });
    expect(await h.messageCount()).toBe(before + 1);
  });

  it("generate a message id when none is sent", async () => {
    const before = await h.messageCount();
    expect(
      await post(
        base,
        "/v1/batch",
        {
          batch: [
            { type: "track", userId: "u", event: "NoId" },
            { type: "track", userId: "u", event: "NoId" },
          ],
        },
        { writeKey: src.writeKey },
      ),
    ).toMatchObject(ok);
    expect(await h.messageCount()).toBe(before + 2);
  });
});

describe("error answers", () => {
  it("400 with code, message and violations named as sent; nothing of the request stored", async () => {
    const before = await h.messageCount();
    const batch = [0, 1, 2].map((i) => ({ type: "track", userId: "u", event: "E", messageId: `never-${i}` }));
    const r = await post(
      base,
      "/v1/batch",
      { batch: [...batch, { type: "track", userId: "u" }] },
      { writeKey: src.writeKey },
    );
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("INVALID_ARGUMENT");
    expect(r.body.message).toContain("batch[3].event");
    expect(r.body.violations).toEqual([
      { field: "batch[3].event", description: "a track call needs an event name" },
    ]);
    expect(await h.messageCount()).toBe(before);

    const bad = await post(base, "/v1/track", "{not json", { writeKey: src.writeKey });
    expect(bad.status).toBe(400);
    expect(bad.body.violations?.[0]?.field).toBe("body");
    expect((await post(base, "/v1/track", "[1]", { writeKey: src.writeKey })).status).toBe(400);
    const types = await post(
      base,
      "/v1/batch",
      { batch: [{ type: "nope" }, 5, { type: "track", userId: 7, event: "E" }] },
      { writeKey: src.writeKey },
    );
    expect(types.body.violations?.map((v) => v.field)).toEqual([
      "batch[0].type",
      "batch[1]",
      "batch[2].userId",
      "batch[2].userId",
    ]);
    expect(
      (await post(base, "/v1/batch", { batch: [] }, { writeKey: src.writeKey })).body.violations?.[0]?.field,
    ).toBe("batch");
    expect(await h.messageCount()).toBe(before);
  });

  it("401 for a missing or unknown write key, with WWW-Authenticate", async () => {
    const none = await post(base, "/v1/track", { userId: "u", event: "E" });
    expect(none.status).toBe(401);
    expect(none.body.code).toBe("UNAUTHENTICATED");
    expect(none.headers.get("www-authenticate")).toMatch(/^Basic/);
    const unknown = await post(base, "/v1/track", { userId: "u", event: "E" }, { writeKey: "hpk_not-a-key" });
    expect(unknown.status).toBe(401);
    expect(unknown.body.message).toContain("unknown write key");
    expect((await post(base, "/v1/track", { writeKey: "hpk_nope", userId: "u", event: "E" })).status).toBe(
      401,
    );
    expect((await post(base, "/v1/track", {}, { headers: { Authorization: "Bearer x" } })).status).toBe(401);
  });

  it("404 for other paths, 405 for other methods", async () => {
    expect((await post(base, "/v1/nothing", {}, { writeKey: src.writeKey })).status).toBe(404);
    expect((await post(base, "/", {}, { writeKey: src.writeKey })).status).toBe(404);
    const get = await fetch(`${base}/v1/track`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST, OPTIONS");
  });

  it("limits: 32 KiB per call, calls per batch, 500 KiB per body", async () => {
    const big = { type: "track", userId: "u", event: "E", properties: { blob: "x".repeat(33 * 1024) } };
    const one = await post(
      base,
      "/v1/batch",
      { batch: [{ type: "track", userId: "u", event: "E" }, big] },
      { writeKey: src.writeKey },
    );
    expect(one.status).toBe(400);
    expect(one.body.violations?.[0]).toMatchObject({ field: "batch[1]" });
    expect(one.body.violations?.[0]?.description).toMatch(/32 KiB/);
    const single = await post(base, "/v1/track", big, { writeKey: src.writeKey });
    expect(single.status).toBe(400);
    const many = await post(
      base,
      "/v1/batch",
      { batch: Array.from({ length: 2501 }, () => ({ type: "track", userId: "u", event: "E" })) },
      { writeKey: src.writeKey },
    );
    expect(many.status).toBe(400);
    expect(many.body.violations).toEqual([
      { field: "batch", description: "the batch has 2501 calls; at most 2500 are allowed, split it" },
    ]);
    const body = await post(
      base,
      "/v1/batch",
      { batch: Array.from({ length: 20 }, () => ({ ...big, properties: { blob: "x".repeat(30 * 1024) } })) },
      { writeKey: src.writeKey },
    );
    expect(body.status).toBe(413);
    expect(body.body.violations?.[0]?.field).toBe("body");
  });

  it("refuses __proto__ keys instead of dropping them", async () => {
    const text = `{"userId":"u","event":"E","properties":{"a":{"__proto__":{"x":1}}}}`;
    const v = await refused("/v1/track", text);
    expect(v?.field).toBe("properties");
    expect(v?.description).toContain("__proto__");
    const ctx = await post(
      base,
      "/v1/batch",
      `{"batch":[{"type":"identify","userId":"u","traits":{"__proto__":"x"}}]}`,
      { writeKey: src.writeKey },
    );
    expect(ctx.body.violations?.[0]?.field).toBe("batch[0].traits");
  });

  it("refuses message ids a header or a transport would alter (issue 10 findings 1 and 2)", async () => {
    for (const id of [...HOSTILE_MESSAGE_IDS, "m".repeat(101)]) {
      const r = await post(
        base,
        "/v1/track",
        { userId: "u", event: "E", messageId: id },
        { writeKey: src.writeKey },
      );
      expect(r.status, JSON.stringify(id)).toBe(400);
      expect(r.body.violations?.[0]?.field).toBe("messageId");
      expect(r.body.message).toMatch(/printable ASCII/);
    }
    expect(
      (await post(base, "/v1/track", { userId: "u", event: "E", messageId: 5 }, { writeKey: src.writeKey }))
        .status,
    ).toBe(400);
  });
});

describe("limits count what is stored; no value changes silently (issue 22)", () => {
  const track = (i: number) => ({ type: "track", userId: "u", event: "E", messageId: `i22-${i}` });
  const streamBytes = async () => (await h.jsm.streams.info(EVENTS_STREAM)).state.bytes;

  it("finding 2: a batch-level context or integrations copied into 100 calls is refused, nothing stored", async () => {
    const before = await h.messageCount();
    const context = { blob: "x".repeat(100 * 1024) };
    const integrations = Object.fromEntries(
      Array.from({ length: 6000 }, (_, i) => [`Destination ${i}`, true]),
    );
    for (const shared of [{ context }, { integrations }]) {
      const batch = Array.from({ length: 100 }, (_, i) => track(i));
      const r = await post(base, "/v1/batch", { batch, ...shared }, { writeKey: src.writeKey });
      expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(400);
      // The batch as stored (~10 MB) and each call (~100 KiB with its copy) are named.
      expect(r.body.violations?.[0]?.field).toBe("batch");
      expect(r.body.violations?.[0]?.description).toMatch(/copied in; at most 512000/);
      expect(r.body.violations?.[1]).toMatchObject({ field: "batch[0]" });
      expect(r.body.violations?.[1]?.description).toMatch(/copied in; at most 32768/);
    }
    // Each call fits with its copy, the sum as stored does not: 20 x (30 KiB + call) > 500 KiB.
    const sum = await post(
      base,
      "/v1/batch",
      { batch: Array.from({ length: 20 }, (_, i) => track(i)), context: { blob: "x".repeat(30 * 1024) } },
      { writeKey: src.writeKey },
    );
    expect(sum.status).toBe(400);
    expect(sum.body.violations).toHaveLength(1);
    expect(sum.body.violations?.[0]?.field).toBe("batch");
    expect(await h.messageCount()).toBe(before);
  });

  it("finding 2: stored bytes stay within the batch limit plus a stamp per call, however fields are shared", async () => {
    // The most a request can make the store hold through copies: 15 calls x 31 KiB of context.
    const body = JSON.stringify({
      batch: Array.from({ length: 15 }, (_, i) => ({ ...track(i), messageId: `ratio-${i}` })),
      context: { blob: "x".repeat(31 * 1024) },
    });
    const before = await streamBytes();
    expect(await post(base, "/v1/batch", body, { writeKey: src.writeKey })).toMatchObject(ok);
    const stored = (await streamBytes()) - before;
    const ratio = stored / MAX_BATCH_BYTES;
    // Printed for the README's figure: stored / request and stored / the largest request allowed.
    console.log(
      `copied context: request ${body.length} B, stored ${stored} B (${(stored / body.length).toFixed(1)}x the request, ${ratio.toFixed(2)}x the batch limit)`,
    );
    expect(stored).toBeLessThanOrEqual(MAX_BATCH_BYTES + 15 * 512);

    // Without copies: 2500 smallest calls, the most stamps per request byte.
    const tiny = JSON.stringify({
      batch: Array.from({ length: 2500 }, (_, i) => ({ type: "screen", userId: "u", messageId: `t${i}` })),
    });
    const before2 = await streamBytes();
    expect(await post(base, "/v1/batch", tiny, { writeKey: src.writeKey })).toMatchObject(ok);
    const stored2 = (await streamBytes()) - before2;
    console.log(
      `2500 tiny calls: request ${tiny.length} B, stored ${stored2} B (${(stored2 / tiny.length).toFixed(1)}x the request, ${(stored2 / MAX_BATCH_BYTES).toFixed(2)}x the batch limit)`,
    );
    expect(stored2).toBeLessThanOrEqual(MAX_BATCH_BYTES + 2500 * 512);
  });

  it("finding 2: duplicate keys, written plainly or escaped, are refused with their path", async () => {
    const before = await h.messageCount();
    const big = JSON.stringify({ ...track(1), properties: { blob: "x".repeat(40 * 1024) } });
    const twice = `{"batch":[${JSON.stringify(track(0))}],"b\\u0061tch":[${big}]}`;
    const r = await post(base, "/v1/batch", twice, { writeKey: src.writeKey });
    expect(r.status).toBe(400);
    expect(r.body.violations).toEqual([
      { field: "batch", description: expect.stringMatching(/"batch" appears more than once/) },
    ]);
    expect((await refused("/v1/track", '{"userId":"u","event":"E","event":"F"}'))?.field).toBe("event");
    const nested = await refused(
      "/v1/batch",
      '{"batch":[{"type":"track","userId":"u","event":"E","properties":{"a":[{"k":1,"\\u006b":2}]}}]}',
    );
    expect(nested?.field).toBe("batch[0].properties.a[0].k");
    expect(await h.messageCount()).toBe(before);
  });

  it("a body starting with a byte order mark is read as before (the scan skips it)", async () => {
    const bom = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from('{"userId":"u","event":"E","messageId":"i22-bom"}'),
    ]);
    expect(await post(base, "/v1/track", bom, { writeKey: src.writeKey })).toMatchObject(ok);
    await stored("i22-bom");
  });

  it("finding 7: integers beyond ±(2^53 - 1) and overflowing numbers are refused with their path", async () => {
    const before = await h.messageCount();
    const v = await refused("/v1/track", '{"userId":"u","event":"E","properties":{"id":9007199254740993}}');
    expect(v?.field).toBe("properties.id");
    expect(v?.description).toMatch(/would arrive as 9007199254740992.*string/);
    const nested = await post(
      base,
      "/v1/batch",
      '{"batch":[{"type":"identify","userId":"u","traits":{"a":[{"b":-9007199254740993}]}}],"context":{"n":1e400}}',
      { writeKey: src.writeKey },
    );
    expect(nested.status).toBe(400);
    expect(nested.body.violations?.map((v) => v.field)).toEqual(["batch[0].traits.a[0].b", "context.n"]);
    expect(await h.messageCount()).toBe(before);

    // What keeps its value is stored as JSON.stringify writes it: 1.0 as 1, 1E2 as 100.
    const text =
      '{"userId":"u","event":"E","messageId":"i22-numbers","properties":{"max":9007199254740991,"min":-9007199254740991,"f":1.0,"e":1E2,"small":1e-7}}';
    expect(await post(base, "/v1/track", text, { writeKey: src.writeKey })).toMatchObject(ok);
    expect((await stored("i22-numbers")).raw).toContain(
      '"properties":{"max":9007199254740991,"min":-9007199254740991,"f":1,"e":100,"small":1e-7}',
    );
  });
});

describe("hostile clients", () => {
  it("a gzip bomb is refused while it inflates (413), and the service keeps serving", async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(512 * 1024);
    const r = await post(base, "/v1/batch", bomb, {
      writeKey: src.writeKey,
      headers: { "Content-Encoding": "gzip" },
    });
    expect(r.status).toBe(413);
    expect(r.body.message).toContain("decompressed");
    const notGzip = await post(base, "/v1/batch", "not gzip at all", {
      writeKey: src.writeKey,
      headers: { "Content-Encoding": "gzip" },
    });
    expect(notGzip.status).toBe(400);
    expect(
      (await post(base, "/v1/batch", "x", { writeKey: src.writeKey, headers: { "Content-Encoding": "br" } }))
        .status,
    ).toBe(415);
    expect(
      await post(base, "/v1/track", { userId: "u", event: "after bomb" }, { writeKey: src.writeKey }),
    ).toMatchObject(ok);
  });

  it("a 10 MB body is refused as it streams in: announced, or chunked", async () => {
    const tenMb = Buffer.alloc(10 * 1024 * 1024, 0x61);
    const announced = await post(base, "/v1/batch", tenMb, { writeKey: src.writeKey });
    expect(announced.status).toBe(413);
    // Chunked: no length announced; the answer comes before the client finished sending.
    const answer = await new Promise<{ status: number; sentWhenAnswered: number }>((resolve, reject) => {
      let sent = 0;
      const req = request(`${base}/v1/batch`, {
        method: "POST",
        headers: { Authorization: basic(src.writeKey) },
      });
      req.on("response", (res) => {
        res.resume();
        resolve({ status: res.statusCode!, sentWhenAnswered: sent });
        req.destroy();
      });
      req.on("error", (err) => (sent > 0 ? undefined : reject(err)));
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const pump = () => {
        while (sent < tenMb.length) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once("drain", pump);
        }
        req.end();
      };
      pump();
    });
    expect(answer.status).toBe(413);
    expect(answer.sentWhenAnswered).toBeLessThan(tenMb.length);
    expect(
      await post(base, "/v1/track", { userId: "u", event: "after 10 MB" }, { writeKey: src.writeKey }),
    ).toMatchObject(ok);
  });

  it("a client sending one byte a second is cut off (headers and body)", async () => {
    const slowHeaders = "POST /v1/track HTTP/1.1\r\nHost: x\r\n".split("");
    const body = JSON.stringify({ userId: "u", event: "slow", messageId: "slow-1" });
    const head = `POST /v1/track HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic(src.writeKey)}\r\nContent-Length: ${body.length}\r\n\r\n`;
    const [a, b] = await Promise.all([
      rawExchange(httpAddress, slowHeaders, { gapMs: 1_000, timeoutMs: 30_000 }),
      rawExchange(httpAddress, [head, ...body.split("")], { gapMs: 1_000, timeoutMs: 30_000 }),
    ]);
    expect(a.closedByServer).toBe(true);
    expect(b.closedByServer).toBe(true);
    expect(b.text).not.toContain("200 OK");
    expect(await h.find("slow-1")).toBeUndefined();
  }, 60_000);

  it("500 garbage requests are each answered or closed, and the service stays up", async () => {
    let seed = 42;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const routes = ["/v1/track", "/v1/batch", "/v1/identify", "/v1/import", "/v1/alias", "/x", "/v1/"];
    const pieces = [
      '{"batch":[',
      '{"type":"track"',
      '"userId":',
      "null",
      "1e999",
      '"\\ud800"',
      "[[[[[[",
      "}",
      ",",
      '"__proto__":',
      "\u0000",
      "\xff\xfe",
    ];
    const jobs: Promise<unknown>[] = [];
    for (let i = 0; i < 500; i++) {
      const route = routes[Math.floor(rand() * routes.length)]!;
      const kind = i % 4;
      if (kind === 3) {
        const bytes = Buffer.from(
          Array.from({ length: Math.floor(rand() * 300) }, () => Math.floor(rand() * 256)),
        );
        jobs.push(rawExchange(httpAddress, [bytes], { timeoutMs: 10_000 }));
        continue;
      }
      const text = Array.from(
        { length: Math.floor(rand() * 12) },
        () => pieces[Math.floor(rand() * pieces.length)],
      ).join("");
      const options =
        kind === 1
          ? { writeKey: src.writeKey }
          : kind === 2
            ? { writeKey: src.writeKey, headers: { "Content-Encoding": "gzip" } }
            : {};
      jobs.push(
        post(base, route, text, options).then((r) => {
          expect([400, 401, 404, 413, 415]).toContain(r.status);
        }),
      );
      if (jobs.length >= 50) await Promise.all(jobs.splice(0));
    }
    await Promise.all(jobs);
    expect(
      await post(base, "/v1/track", { userId: "u", event: "still up" }, { writeKey: src.writeKey }),
    ).toMatchObject(ok);
  }, 120_000);
});

describe("observability", () => {
  it('counts HTTP requests with transport="http" and never logs write keys', async () => {
    const n = await counterValue(h.ingest.metrics.registry, "hookpost_ingest_calls_total", {
      transport: "http",
      method: "/v1/track",
      code: "OK",
    });
    expect(n).toBeGreaterThan(0);
    const g = await counterValue(h.ingest.metrics.registry, "hookpost_ingest_calls_total", {
      transport: "grpc",
    });
    expect(g).toBeGreaterThan(0);
  });
});
