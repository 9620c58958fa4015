/**
 * The requests Segment's mobile SDKs send (issue 29), byte for byte as their sources build them
 * (no Swift or Kotlin runtime here to run the SDKs themselves):
 *
 * - analytics-kotlin 1.25.0 (core/.../HTTPClient.kt, utilities/StorageImpl.kt): settings
 *   `GET https://<cdnHost>/projects/<key>/settings` with `Content-Type: application/json;
 *   charset=utf-8`; uploads `POST https://<apiHost>/b`, `Content-Type: text/plain`,
 *   `Content-Encoding: gzip`, chunked, `User-Agent: analytics-kotlin/<version>`, `X-Retry-Count` on
 *   retries, the body a file written as `{"batch":[` + events joined by `,` +
 *   `],"sentAt":"…","writeKey":"…"}`; no Authorization header.
 * - analytics-swift 1.9.4 (Utilities/Networking/HTTPClient.swift, Storage/Types/DirectoryStore.swift):
 *   `POST https://<apiHost>/b`, `Content-Type: application/json; charset=utf-8`,
 *   `User-Agent: analytics-ios/<version>`, `Accept-Encoding: gzip`, not compressed, the body a file
 *   of lines: `{ "batch": [`, each event (`,` before all but the first), then
 *   `],"sentAt":"…","writeKey":"…"}`, each line ending in a newline.
 *
 * Both read `integrations["Segment.io"].apiHost` from the settings and send there afterwards.
 */
import { createHmac, randomUUID } from "node:crypto";
import { request } from "node:http";
import { gzipSync } from "node:zlib";
import { beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS, settledCount } from "../e2e/helpers.js";
import type { Receiver } from "../helpers/receiver.js";
import { receiverLane } from "../helpers/receiver-lane.js";
import { useStack } from "../helpers/use-stack.js";
import { basic } from "./helpers.js";

const SECRET = "mobile-s3cret";
const KOTLIN_UA = "analytics-kotlin/1.24.1";
const SWIFT_UA = "analytics-ios/1.9.4";
const KOTLIN = { name: "analytics-kotlin", version: "1.24.1" };
const SWIFT = { name: "analytics-swift", version: "1.9.4" };
const stack = useStack({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0" } });
/** `host:port/v1`: what an app is configured with as apiHost and cdnHost. */
let host: string;

beforeAll(() => {
  host = `${stack.ingest.httpAddress}/v1`;
});

/** One request as the SDK's HTTP stack writes it: exact headers, body in `chunks` (chunked when >1). */
function send(
  method: string,
  path: string,
  headers: Record<string, string>,
  chunks: Buffer[] = [],
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: stack.ingest.httpAddress!.split(":")[0],
      port: Number(stack.ingest.httpAddress!.split(":")[1]),
      method,
      path,
      headers,
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        text += d;
      });
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on("error", reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

/** The six calls an app sends, as the SDKs serialise them (the context trimmed to a few keys). */
function mobileEvents(library: { name: string; version: string }, at: string) {
  const anonymousId = randomUUID();
  const base = (type: string, userId = "user-1") => ({
    type,
    messageId: randomUUID(),
    anonymousId,
    integrations: {},
    context: { library, os: { name: "Android", version: "15" }, device: { model: "Pixel 9" } },
    userId,
    timestamp: at,
    _metadata: { bundled: [], unbundled: [], bundledIds: [] },
  });
  return [
    { traits: { plan: "pro" }, ...base("identify") },
    { properties: { total: 12.5 }, event: "Order Completed", ...base("track") },
    { name: "Main", category: "", properties: {}, ...base("screen") },
    { name: "Home", category: "Docs", properties: { path: "/" }, ...base("page") },
    // Before identify, analytics-kotlin writes userId "" (not sent).
    { groupId: "g-1", traits: { size: 3 }, ...base("group", "") },
    { previousId: anonymousId, ...base("alias") },
  ];
}

async function expectDelivered(
  rx: Receiver,
  events: Array<{ type: string; messageId: string }>,
): Promise<void> {
  await rx.waitFor(events.length, 30_000);
  expect(await settledCount(rx, 1_000)).toBe(events.length);
  for (const e of events) {
    const got = rx.requests.filter((r) => r.headers["idempotency-key"] === e.messageId);
    expect(got, e.type).toHaveLength(1);
    expect((JSON.parse(got[0]!.body.toString()) as { type: string }).type).toBe(e.type);
    expect(got[0]!.headers["x-signature"]).toBe(
      createHmac("sha1", SECRET).update(got[0]!.body).digest("hex"),
    );
  }
}

/**
 * One test's lane (its own source and receiver): the write key, and the six calls `library`
 * writes, stamped `at`. `delivered(sent)` waits until each call sent (all six unless told) has
 * reached the receiver once, signed (expectDelivered), then closes the receiver.
 */
async function sdkLane(name: string, library: { name: string; version: string }, at: string) {
  const { writeKey, rx } = await receiverLane(stack, name, { sharedSecret: SECRET });
  const events = mobileEvents(library, at);
  return {
    writeKey,
    events,
    async delivered(sent = events) {
      await expectDelivered(rx, sent);
      await rx.close();
    },
  };
}

describe("analytics-kotlin's requests", () => {
  it("settings, then a gzip chunked /v1/b upload with the key in the body; a retry stores nothing twice", async () => {
    const { writeKey, events, delivered } = await sdkLane("kotlin", KOTLIN, "2026-11-24T10:00:00.123Z");
    const settings = await send("GET", `/v1/projects/${writeKey}/settings`, {
      "User-Agent": KOTLIN_UA,
      "Content-Type": "application/json; charset=utf-8",
    });
    expect(settings.status).toBe(200);
    const segment = (
      JSON.parse(settings.text) as { integrations: Record<string, { apiKey: string; apiHost: string }> }
    ).integrations["Segment.io"];
    expect(segment).toMatchObject({ apiKey: writeKey, apiHost: host });

    const file = `{"batch":[${events.map((e) => JSON.stringify(e)).join(",")}],"sentAt":"2026-11-24T10:00:05.000Z","writeKey":"${writeKey}"}`;
    const gz = gzipSync(file);
    // GZIPOutputStream over a chunked stream: the bytes arrive in several chunks.
    const chunks = [gz.subarray(0, 10), gz.subarray(10, 200), gz.subarray(200)];
    const headers = {
      "User-Agent": KOTLIN_UA,
      "Content-Type": "text/plain",
      "Content-Encoding": "gzip",
      "Transfer-Encoding": "chunked",
    };
    const upload = await send(
      "POST",
      `/${segment!.apiHost.split("/").slice(1).join("/")}/b`,
      headers,
      chunks,
    );
    expect(upload).toMatchObject({ status: 200, text: '{"success":true}' });
    // The upload is retried when the answer was lost: same file, X-Retry-Count.
    const retry = await send("POST", "/v1/b", { ...headers, "X-Retry-Count": "1" }, chunks);
    expect(retry.status).toBe(200);
    await delivered();
  }, 90_000);
});

describe("analytics-swift's requests", () => {
  it("an uncompressed /v1/b upload of its line-written batch file, the key in the body", async () => {
    const { writeKey, events, delivered } = await sdkLane("swift", SWIFT, "2026-11-24T10:00:00.000Z");
    const lines = [
      '{ "batch": [',
      ...events.map((e, i) => (i === 0 ? "" : ",") + JSON.stringify(e)),
      `],"sentAt":"2026-11-24T10:00:05.000Z","writeKey":"${writeKey}"}`,
    ];
    const body = Buffer.from(lines.map((l) => `${l}\n`).join(""));
    const r = await send(
      "POST",
      "/v1/b",
      {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": SWIFT_UA,
        "Accept-Encoding": "gzip",
        "Content-Length": String(body.length),
      },
      [body],
    );
    expect(r).toMatchObject({ status: 200, text: '{"success":true}' });
    await delivered();
  }, 90_000);
});

describe("the write key in Basic auth instead of the body", () => {
  it("/v1/b and /v1/batch take gzip bodies with `Authorization: Basic base64(key:)`", async () => {
    const { writeKey, events, delivered } = await sdkLane("basic", KOTLIN, "2026-11-24T10:00:00.000Z");
    const sent: typeof events = [];
    for (const [i, path] of ["/v1/b", "/v1/batch"].entries()) {
      const batch = events.slice(i * 3, i * 3 + 3);
      sent.push(...batch);
      const gz = gzipSync(JSON.stringify({ batch, sentAt: "2026-11-24T10:00:05.000Z" }));
      const r = await send(
        "POST",
        path,
        {
          "Content-Type": "text/plain",
          "Content-Encoding": "gzip",
          Authorization: basic(writeKey),
          "Content-Length": String(gz.length),
        },
        [gz],
      );
      expect(r, path).toMatchObject({ status: 200, text: '{"success":true}' });
    }
    await delivered(sent);
  }, 90_000);
});
