/**
 * Segment's browser SDK, `@segment/analytics-next` from node_modules, in a real Chromium (issue 29):
 * a page served from one origin (http://127.0.0.1:<port>) loads its settings from Hookpost at
 * another (http://localhost:<port>), so every request is a real cross-origin one with its CORS
 * preflight. Every call type reaches a real webhook receiver once, signed, in both delivery
 * strategies and when the page closes with calls still buffered.
 */
import { createHmac } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, resolve } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { useChromium, watchErrors } from "../console/browser.js";
import { counterValue, STACK_OPTIONS, settledCount } from "../e2e/helpers.js";
import { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useRateLimitedHarness } from "../ingest/harness.js";
import type { StartOptions } from "./browser-page/start-options.js";

const SECRET = "browser-s3cret";
const PAGE_SOURCE = resolve("test/http/browser-page");
const TYPES = ["identify", "track", "page", "screen", "group", "alias"];

let stack: Stack;
const browser = useChromium();
let pageServer: Server;
let pageDir: string;
/** The page's origin: another host and port than Hookpost's. */
let pageOrigin: string;
/** Hookpost's HTTP API as the page reaches it. */
let hookpost: string;

/** Serves the built page (what a customer's web server does). */
async function servePage(dir: string): Promise<Server> {
  const types: Record<string, string> = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".map": "application/json",
  };
  const server = createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const file = join(dir, path === "/" ? "index.html" : path);
    if (!file.startsWith(dir)) return void res.writeHead(404).end();
    try {
      const body = await readFile(file);
      res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return server;
}

beforeAll(async () => {
  pageDir = await mkdtemp(join(tmpdir(), "hookpost-page-"));
  // The page bundled from node_modules as a customer's build would (the repo's Vite).
  await build({
    root: PAGE_SOURCE,
    configFile: false,
    logLevel: "warn",
    build: { outDir: pageDir, emptyOutDir: true, target: "es2022" },
  });
  pageServer = await servePage(pageDir);
  pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
  stack = await Stack.start({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0" } });
  hookpost = `http://localhost:${stack.ingest.httpAddress!.split(":")[1]}`;
}, 120_000);

afterAll(async () => {
  await stack?.close();
  pageServer?.close();
  if (pageDir) await rm(pageDir, { recursive: true, force: true });
});

interface Lane {
  sourceId: string;
  writeKey: string;
  rx: Receiver;
}

/** A source (allowing `origins`) with its own destination and receiver (closed when the test finishes). */
async function lane(name: string, allowedOrigins: string[] = []): Promise<Lane> {
  const r = await stack.admin.createSource({ name, allowedOrigins });
  const rx = await Receiver.http();
  onTestFinished(() => rx.close());
  await stack.destination({ name, sourceIds: [r.source!.id], urls: [rx.url()], sharedSecret: SECRET });
  return { sourceId: r.source!.id, writeKey: r.writeKey, rx };
}

/** The test page, in `context` or else in a new browser context closed when the test finishes. */
async function openPage(
  context?: BrowserContext,
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const ctx = context ?? (await browser.newContext());
  if (!context) onTestFinished(() => ctx.close());
  const page = await ctx.newPage();
  const errors = watchErrors(page);
  await page.goto(`${pageOrigin}/`);
  return { context: ctx, page, errors };
}

type Seen = { sent: Array<{ type: string; messageId: string }>; errors: string[] };
const seen = (page: Page) =>
  page.evaluate(() => (globalThis as unknown as { hookpostTest: { seen: Seen } }).hookpostTest.seen);

async function start(page: Page, o: StartOptions): Promise<void> {
  await page.evaluate(
    (opts) =>
      (globalThis as unknown as { hookpostTest: { start(o: unknown): Promise<void> } }).hookpostTest.start(
        opts,
      ),
    o,
  );
}

async function sendEveryType(page: Page, tag: string): Promise<Seen["sent"]> {
  await page.evaluate(
    (t) =>
      (
        globalThis as unknown as { hookpostTest: { sendEveryType(t: string): void } }
      ).hookpostTest.sendEveryType(t),
    tag,
  );
  // Every call went through the SDK's pipeline (and so has its message id).
  await until(async () => (await seen(page)).sent.length >= 6, { message: "the page to send six calls" });
  return (await seen(page)).sent;
}

/** Each call reached the receiver once, with its type and a valid X-Signature. */
async function expectDeliveredOnce(rx: Receiver, sent: Seen["sent"]): Promise<void> {
  expect(sent.map((s) => s.type).sort()).toEqual([...TYPES].sort());
  await rx.waitFor(6, 30_000);
  expect(await settledCount(rx, 1_000)).toBe(6);
  for (const { type, messageId } of sent) {
    const got = rx.requests.filter((r) => r.headers["idempotency-key"] === messageId);
    expect(got, `${type} ${messageId}`).toHaveLength(1);
    const body = JSON.parse(got[0]!.body.toString()) as {
      type: string;
      context?: { library?: { name?: string } };
    };
    expect(body.type).toBe(type);
    expect(body.context?.library?.name).toBe("analytics.js");
    expect(got[0]!.headers["x-signature"]).toBe(
      createHmac("sha1", SECRET).update(got[0]!.body).digest("hex"),
    );
  }
}

describe("analytics-next in Chromium, from another origin", () => {
  it("standard delivery: cdnURL only, the settings path says where to send (a source allowing this origin)", async () => {
    const l = await lane("browser-standard", [pageOrigin]);
    const { page, errors } = await openPage();
    await start(page, { writeKey: l.writeKey, cdnURL: hookpost });
    const sent = await sendEveryType(page, "std");
    await expectDeliveredOnce(l.rx, sent);
    // The SDK sent each call to a short path (/v1/t, /v1/i, …) and nothing else.
    const shortPaths = await Promise.all(
      ["/v1/t", "/v1/i", "/v1/p", "/v1/s", "/v1/g", "/v1/a"].map((method) =>
        counterValue(stack.ingest.metrics.registry, "hookpost_ingest_calls_total", { method, code: "OK" }),
      ),
    );
    expect(shortPaths.every((n) => n >= 1)).toBe(true);
    expect((await seen(page)).errors).toEqual([]);
    expect(errors).toEqual([]);
  }, 90_000);

  it("batching delivery with apiHost given: one /v1/b request carries the six calls", async () => {
    const l = await lane("browser-batching");
    const before = await counterValue(stack.ingest.metrics.registry, "hookpost_ingest_calls_total", {
      method: "/v1/b",
    });
    const { page, errors } = await openPage();
    await start(page, {
      writeKey: l.writeKey,
      cdnURL: hookpost,
      apiHost: `${new URL(hookpost).host}/v1`,
      batching: { size: 6, timeout: 60_000 },
    });
    const sent = await sendEveryType(page, "batch");
    await expectDeliveredOnce(l.rx, sent);
    expect(
      (await counterValue(stack.ingest.metrics.registry, "hookpost_ingest_calls_total", {
        method: "/v1/b",
      })) - before,
    ).toBe(1);
    expect(errors).toEqual([]);
  }, 90_000);

  it("calls still buffered when the tab closes are sent with keepalive, once", async () => {
    const l = await lane("browser-close");
    const { page } = await openPage();
    // A batch that would wait a minute: only closing the page sends it.
    await start(page, { writeKey: l.writeKey, cdnURL: hookpost, batching: { size: 100, timeout: 60_000 } });
    const sent = await sendEveryType(page, "close");
    expect(l.rx.requests).toHaveLength(0);
    await page.close({ runBeforeUnload: true });
    await expectDeliveredOnce(l.rx, sent);
  }, 90_000);

  it("standard delivery with keepalive: calls made as the page navigates away arrive once, also when the next visit resends those in flight at unload", async () => {
    const l = await lane("browser-leave");
    const { context, page } = await openPage();
    await start(page, { writeKey: l.writeKey, cdnURL: hookpost, keepalive: true });
    const sent = await sendEveryType(page, "leave");
    // Leave at once: the requests in flight go on (keepalive) while the page unloads.
    await page.goto("about:blank");
    await expectDeliveredOnce(l.rx, sent);
    // The SDK saves what is in flight at unload and sends it again on the next visit (seen here
    // resending 2 of the 6):
    // Hookpost stores a message id once, so the receiver still has each call once.
    const { page: again } = await openPage(context);
    await start(again, { writeKey: l.writeKey, cdnURL: hookpost, keepalive: true });
    expect(await settledCount(l.rx, 2_000)).toBe(6);
  }, 90_000);

  it("a page reads {success:true} and the retry headers, nothing of the admin API or the console; a disallowed origin stores nothing", async () => {
    const open = await lane("browser-read");
    const locked = await lane("browser-locked", ["https://shop.example.com"]);
    const { page } = await openPage();
    type Read = { status: number; text: string } | { error: string };
    const read = (url: string, init: RequestInit) =>
      page.evaluate(
        ([u, i]) =>
          (
            globalThis as unknown as { hookpostTest: { read(u: string, i: RequestInit): Promise<Read> } }
          ).hookpostTest.read(u, i),
        [url, init] as const,
      );
    const call = (writeKey: string, messageId: string) => ({
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify({ writeKey, userId: "u", event: "E", messageId }),
    });
    expect(await read(`${hookpost}/v1/t`, call(open.writeKey, "read-1"))).toEqual({
      status: 200,
      text: '{"success":true}',
    });
    // The admin API, even with the right token, and the console are not readable from a page.
    for (const [url, init] of [
      [
        `${hookpost}/hookpost.v1.AdminService/ListSources`,
        {
          method: "POST",
          headers: { "Content-Type": "application/json", Authorization: `Bearer ${STACK_ADMIN_TOKEN}` },
          body: "{}",
        },
      ],
      [
        `${hookpost}/hookpost.v1.AdminService/ListSources`,
        { method: "POST", headers: { "Content-Type": "text/plain" }, body: "{}" },
      ],
      [`${hookpost}/console/`, { method: "GET" }],
    ] as const) {
      expect(await read(url, init), url).toEqual({ error: expect.stringContaining("Failed to fetch") });
    }
    // A source that allows another web site: its settings and calls are refused and unreadable.
    expect(await read(`${hookpost}/v1/projects/${locked.writeKey}/settings`, { method: "GET" })).toEqual({
      error: expect.stringContaining("Failed to fetch"),
    });
    expect(await read(`${hookpost}/v1/t`, call(locked.writeKey, "locked-1"))).toEqual({
      error: expect.stringContaining("Failed to fetch"),
    });
    await open.rx.waitFor(1, 30_000);
    expect(await settledCount(locked.rx, 1_000)).toBe(0);
    expect(
      await counterValue(stack.ingest.metrics.registry, "hookpost_ingest_calls_total", {
        method: "/v1/t",
        code: "PERMISSION_DENIED",
      }),
    ).toBe(1);
  }, 90_000);
});

describe("analytics-next against a source over its rate limit", () => {
  const h = useRateLimitedHarness(2);

  it("reads the 429's delay and sends each call once it may (stored once each)", async () => {
    const { id, writeKey } = await h.source("limited");
    const api = `http://localhost:${h.ingest.httpAddress!.split(":")[1]}`;
    const { page } = await openPage();
    // What a page can read of a 429: the delay, in both headers the SDKs read. The page sends
    // until it is refused (a slow machine may let a few through as the bucket refills).
    const { status, headers } = await page.evaluate(
      async ([url, key]) => {
        const t = (
          globalThis as unknown as {
            hookpostTest: {
              readHeaders(
                u: string,
                i: RequestInit,
                n: string[],
              ): Promise<{ status: number; headers: Record<string, string | null> }>;
            };
          }
        ).hookpostTest;
        const init = {
          method: "POST",
          headers: { "Content-Type": "text/plain" },
          body: JSON.stringify({ writeKey: key, userId: "u", event: "E" }),
        };
        let last: Awaited<ReturnType<typeof t.readHeaders>>;
        let sent = 0;
        do last = await t.readHeaders(url, init, ["retry-after", "x-ratelimit-reset"]);
        while (last.status !== 429 && ++sent < 50);
        return last;
      },
      [`${api}/v1/t`, writeKey] as const,
    );
    expect(status).toBe(429);
    expect(headers["retry-after"]).toMatch(/^[1-9]\d*$/);
    expect(headers["x-ratelimit-reset"]).toBe(headers["retry-after"]);

    const before = (await h.stored()).filter((s) => s.call.sourceId === id).length;
    await start(page, { writeKey, cdnURL: api });
    const sent = await sendEveryType(page, "limited");
    await until(async () => (await h.stored()).filter((s) => s.call.sourceId === id).length >= before + 6, {
      timeout: 30_000,
      message: "the six calls stored despite the rate limit",
    });
    const stored = (await h.stored()).filter((s) => s.call.sourceId === id).map((s) => s.call.messageId);
    for (const { messageId } of sent) expect(stored.filter((m) => m === messageId)).toHaveLength(1);
    expect(
      await counterValue(h.ingest.metrics.registry, "hookpost_ingest_calls_total", {
        method: "/v1/t",
        code: "RESOURCE_EXHAUSTED",
      }),
    ).toBeGreaterThan(0);
  }, 90_000);
});
