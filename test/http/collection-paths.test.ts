/**
 * What browsers and apps need from the HTTP API (issue 29), request by request: the short paths,
 * `text/plain` bodies, the settings path, CORS on the collection paths only, a source's
 * allowed_origins, and the 429 headers the SDKs read. The real SDKs run in browser-sdk.test.ts and
 * mobile-sdks.test.ts.
 */
import type { IncomingMessage } from "node:http";
import { apiEndpoint, ingestConfigFromEnv } from "@hookpost/api";
import { Code } from "@hookpost/contract";
import { describe, expect, it } from "vitest";
import { counterValue } from "../e2e/helpers.js";
import { failure, fields, useHarness, useRateLimitedHarness } from "../ingest/harness.js";
import { basic, post } from "./helpers.js";

const ok = { status: 200, body: { success: true } };
const SHOP = "https://shop.example.com";
const EVIL = "https://evil.example.net";

const h = useHarness({ config: { httpAddress: "127.0.0.1:0" } });

/** A POST as analytics.js sends it: text/plain JSON, the key in the body, from `origin`. */
async function browserPost(path: string, body: object, origin?: string, auth?: string) {
  const headers: Record<string, string> = { "Content-Type": "text/plain" };
  if (origin) headers.Origin = origin;
  if (auth) headers.Authorization = basic(auth);
  return post(h.httpBase, path, body, { headers });
}

const stored = async (messageId: string) => (await h.find(messageId))?.call;

describe("short paths", () => {
  it("/v1/{t,i,p,s,g,a} store exactly what the long paths store", async () => {
    const src = await h.source("short");
    const common = { userId: "u1", anonymousId: "a1", timestamp: "2026-11-24T10:00:00.000Z" };
    const calls: [string, string, Record<string, unknown>][] = [
      ["t", "track", { event: "Signed Up", properties: { plan: "pro" } }],
      ["i", "identify", { traits: { email: "a@example.com" } }],
      ["p", "page", { name: "Home", category: "Docs", properties: { path: "/" } }],
      ["s", "screen", { name: "Main" }],
      ["g", "group", { groupId: "g1", traits: { size: 3 } }],
      ["a", "alias", { previousId: "a1" }],
    ];
    for (const [short, long, body] of calls) {
      const call = { ...common, ...body, writeKey: src.writeKey };
      expect(await browserPost(`/v1/${short}`, { ...call, messageId: `short-${short}` })).toMatchObject(ok);
      expect(
        await post(
          h.httpBase,
          `/v1/${long}`,
          { ...call, messageId: `long-${long}` },
          { writeKey: src.writeKey },
        ),
      ).toMatchObject(ok);
      const viaShort = await stored(`short-${short}`);
      const viaLong = await stored(`long-${long}`);
      const strip = (c: object | undefined) => ({ ...c, messageId: undefined, receivedAt: undefined });
      expect(viaShort?.type, short).toBe(long);
      expect(strip(viaShort), short).toEqual(strip(viaLong));
    }
    expect(
      await counterValue(h.ingest.metrics.registry, "hookpost_ingest_calls_total", {
        transport: "http",
        method: "/v1/t",
        code: "OK",
      }),
    ).toBe(1);
  });

  it("/v1/b takes analytics.js's and the mobile SDKs' batch: {writeKey, batch, sentAt}", async () => {
    const src = await h.source("short-batch");
    const r = await browserPost("/v1/b", {
      writeKey: src.writeKey,
      sentAt: "2026-11-24T10:00:01.000Z",
      batch: [
        { type: "track", userId: "u", event: "A", messageId: "b-1", sentAt: "2026-11-24T10:00:00.000Z" },
        { type: "page", anonymousId: "x", name: "Home", messageId: "b-2" },
      ],
    });
    expect(r).toMatchObject(ok);
    expect((await stored("b-1"))?.sourceId).toBe(src.id);
    expect((await stored("b-2"))?.type).toBe("page");
  });

  it("share the long paths' rules and limits: the same refusals, word for word", async () => {
    const src = await h.source("short-limits");
    const big = { userId: "u", event: "E", properties: { blob: "x".repeat(33 * 1024) } };
    const viaShort = await post(h.httpBase, "/v1/t", big, { writeKey: src.writeKey });
    const viaLong = await post(h.httpBase, "/v1/track", big, { writeKey: src.writeKey });
    expect(viaShort.status).toBe(400);
    expect(viaShort.body).toEqual(viaLong.body);
    const tooMany = {
      batch: Array.from({ length: 2501 }, () => ({ type: "track", userId: "u", event: "E" })),
    };
    const b = await post(h.httpBase, "/v1/b", tooMany, { writeKey: src.writeKey });
    expect(b.body).toEqual((await post(h.httpBase, "/v1/batch", tooMany, { writeKey: src.writeKey })).body);
    expect(b.status).toBe(400);
    expect(
      (await post(h.httpBase, "/v1/g", { userId: "u" }, { writeKey: src.writeKey })).body.violations,
    ).toEqual([{ field: "groupId", description: expect.stringContaining("group") }]);
    expect((await post(h.httpBase, "/v1/t", { userId: "u", event: "E" })).status).toBe(401);
    const get = await fetch(`${h.httpBase}/v1/t`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST, OPTIONS");
    expect((await post(h.httpBase, "/v1/x", {}, { writeKey: src.writeKey })).status).toBe(404);
  });

  it("accept text/plain and application/json bodies, the key in the body or in Basic auth", async () => {
    const src = await h.source("content-types");
    const types = [
      "text/plain",
      "text/plain;charset=UTF-8",
      "application/json",
      "application/json; charset=utf-8",
    ];
    for (const [i, type] of types.entries()) {
      const body = { userId: "u", event: "E", messageId: `ct-${i}` };
      const inBody = await post(
        h.httpBase,
        "/v1/t",
        { ...body, writeKey: src.writeKey },
        { headers: { "Content-Type": type } },
      );
      expect(inBody, type).toMatchObject(ok);
      const inHeader = await post(
        h.httpBase,
        "/v1/t",
        { ...body, messageId: `ct-h-${i}` },
        {
          writeKey: src.writeKey,
          headers: { "Content-Type": type },
        },
      );
      expect(inHeader, type).toMatchObject(ok);
      expect((await stored(`ct-${i}`))?.sourceId).toBe(src.id);
      expect((await stored(`ct-h-${i}`))?.sourceId).toBe(src.id);
    }
  });
});

describe("the settings path", () => {
  it("answers the SDKs' Segment.io settings for the key's source, cacheable for 5 minutes", async () => {
    const src = await h.source("settings");
    const other = await h.source("settings-other");
    const r = await fetch(`${h.httpBase}/v1/projects/${src.writeKey}/settings`);
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("public, max-age=300");
    expect(r.headers.get("content-type")).toBe("application/json");
    const text = await r.text();
    // Everything analytics-next and the mobile SDKs read, and nothing else: no other source,
    // no destination, no integration to load, no telemetry.
    expect(JSON.parse(text)).toEqual({
      integrations: {
        "Segment.io": { apiKey: src.writeKey, apiHost: `${h.ingest.httpAddress}/v1`, protocol: "http" },
      },
      plan: {},
      edgeFunction: {},
      analyticsNextEnabled: true,
      middlewareSettings: {},
      enabledMiddleware: {},
      metrics: { sampleRate: 0 },
      legacyVideoPluginsEnabled: false,
      remotePlugins: [],
    });
    expect(text).not.toContain(other.writeKey);
    expect(text).not.toContain(src.id);
    const head = await fetch(`${h.httpBase}/v1/projects/${src.writeKey}/settings`, { method: "HEAD" });
    expect(head.status).toBe(200);
  });

  it("404 for an unknown or rotated key (not cached); 405 for other methods; the key never labels a metric", async () => {
    const src = await h.source("settings-404");
    for (const key of ["hpk_unknown", "%ZZ", "x".repeat(300)]) {
      const r = await fetch(`${h.httpBase}/v1/projects/${key}/settings`);
      expect(r.status, key.slice(0, 20)).toBe(404);
      expect(r.headers.get("cache-control")).toBe("no-store");
      expect(((await r.json()) as { code: string }).code).toBe("NOT_FOUND");
    }
    await h.admin.rotateWriteKey({ id: src.id });
    expect((await fetch(`${h.httpBase}/v1/projects/${src.writeKey}/settings`)).status).toBe(404);
    const postIt = await fetch(`${h.httpBase}/v1/projects/${src.writeKey}/settings`, { method: "POST" });
    expect(postIt.status).toBe(405);
    expect(postIt.headers.get("allow")).toBe("GET, OPTIONS");
    const metrics = await h.ingest.metrics.registry.metrics();
    expect(metrics).not.toContain(src.writeKey);
    expect(metrics).toContain('method="/v1/projects/{writeKey}/settings"');
  });

  it("answers HTTP_PUBLIC_URL as apiHost and protocol when set (behind a TLS proxy), else the Host", () => {
    const req = (host?: string) => ({ headers: host === undefined ? {} : { host } }) as IncomingMessage;
    expect(apiEndpoint(req("hookpost:8080"), undefined)).toEqual({
      apiHost: "hookpost:8080/v1",
      protocol: "http",
    });
    expect(apiEndpoint(req("evil"), "https://collect.example.com")).toEqual({
      apiHost: "collect.example.com/v1",
      protocol: "https",
    });
    expect(apiEndpoint(req(), "https://example.com:8443/hookpost")).toEqual({
      apiHost: "example.com:8443/hookpost/v1",
      protocol: "https",
    });
    expect(apiEndpoint(req("[::1]:8080"), undefined).apiHost).toBe("[::1]:8080/v1");
    for (const host of [undefined, "", "a/b", "a b", "a@b"]) {
      expect(() => apiEndpoint(req(host), undefined), String(host)).toThrow(/Host header/);
    }
    // The setting as read from the environment: normalised, or refused with its name.
    expect(ingestConfigFromEnv({ HTTP_PUBLIC_URL: "HTTPS://Collect.Example.com/" }).httpPublicUrl).toBe(
      "https://collect.example.com",
    );
    expect(ingestConfigFromEnv({}).httpPublicUrl).toBeUndefined();
    for (const bad of ["collect.example.com", "ftp://x.com", "https://x.com/?a=1", "https://u:p@x.com"]) {
      expect(() => ingestConfigFromEnv({ HTTP_PUBLIC_URL: bad }), bad).toThrow(/HTTP_PUBLIC_URL/);
    }
  });
});

describe("CORS", () => {
  it("a preflight of a collection path is answered for any origin, allowing what the SDKs send", async () => {
    for (const path of ["/v1/t", "/v1/b", "/v1/track", "/v1/batch", "/v1/import"]) {
      const r = await fetch(`${h.httpBase}${path}`, {
        method: "OPTIONS",
        headers: {
          Origin: EVIL,
          "Access-Control-Request-Method": "POST",
          "Access-Control-Request-Headers": "authorization,content-type,x-retry-count",
        },
      });
      expect(r.status, path).toBe(204);
      expect(r.headers.get("access-control-allow-origin")).toBe(EVIL);
      expect(r.headers.get("access-control-allow-methods")).toBe("POST");
      const allowed = r.headers.get("access-control-allow-headers")!.toLowerCase().split(", ");
      expect(allowed).toEqual(expect.arrayContaining(["authorization", "content-type", "x-retry-count"]));
      expect(r.headers.get("access-control-max-age")).toBe("7200");
      expect(r.headers.get("access-control-allow-credentials")).toBeNull();
      expect(r.headers.get("vary")).toBe("Origin");
    }
    const settings = await fetch(`${h.httpBase}/v1/projects/any/settings`, {
      method: "OPTIONS",
      headers: { Origin: EVIL, "Access-Control-Request-Method": "GET" },
    });
    expect(settings.status).toBe(204);
    expect(settings.headers.get("access-control-allow-methods")).toBe("GET");
  });

  it("answers carry the page's origin (never *), expose the retry headers, and allow no credentials", async () => {
    const src = await h.source("cors-any");
    const r = await browserPost("/v1/t", { writeKey: src.writeKey, userId: "u", event: "E" }, SHOP);
    expect(r).toMatchObject(ok);
    expect(r.headers.get("access-control-allow-origin")).toBe(SHOP);
    expect(r.headers.get("access-control-expose-headers")).toBe("Retry-After, X-RateLimit-Reset");
    expect(r.headers.get("access-control-allow-credentials")).toBeNull();
    expect(r.headers.get("vary")).toBe("Origin");
    // Errors too (the SDK reads the status and drops a call it cannot fix), and without an
    // Origin (a server SDK) no CORS header at all.
    const bad = await browserPost("/v1/t", { writeKey: src.writeKey, userId: "u" }, SHOP);
    expect(bad.status).toBe(400);
    expect(bad.headers.get("access-control-allow-origin")).toBe(SHOP);
    const unknown = await browserPost("/v1/t", { writeKey: "hpk_nope", userId: "u", event: "E" }, SHOP);
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get("access-control-allow-origin")).toBe(SHOP);
    const server = await post(h.httpBase, "/v1/t", { userId: "u", event: "E" }, { writeKey: src.writeKey });
    expect([...server.headers.keys()].filter((k) => k.startsWith("access-control"))).toEqual([]);
    const settings = await fetch(`${h.httpBase}/v1/projects/${src.writeKey}/settings`, {
      headers: { Origin: SHOP },
    });
    expect(settings.headers.get("access-control-allow-origin")).toBe(SHOP);
  });

  it("never on the admin API (Connect) or the console, whatever the request", async () => {
    const paths = [
      "/hookpost.v1.AdminService/ListSources",
      "/console/",
      "/console/index.html",
      "/nothing",
      "/v1/m",
    ];
    for (const path of paths) {
      for (const method of ["OPTIONS", "POST", "GET"]) {
        const r = await fetch(`${h.httpBase}${path}`, {
          method,
          headers: {
            Origin: EVIL,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
            ...(method === "POST" ? { "Content-Type": "application/json", Authorization: "Bearer x" } : {}),
          },
          ...(method === "POST" ? { body: "{}" } : {}),
        });
        const cors = [...r.headers.keys()].filter((k) => k.startsWith("access-control"));
        expect(cors, `${method} ${path}`).toEqual([]);
      }
    }
  });
});

describe("allowed_origins", () => {
  it("is validated, normalised, read back and audited through the admin API", async () => {
    const err = await failure(
      h.admin.createSource({
        name: "bad",
        allowedOrigins: [
          "shop.example.com",
          "https://a.com/path",
          "*",
          "null",
          "ftp://x.com",
          "https://a.*.com",
          SHOP,
          `${SHOP}/`,
        ],
      }),
    );
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(fields(err)).toEqual([
      "allowed_origins[0]",
      "allowed_origins[1]",
      "allowed_origins[2]",
      "allowed_origins[3]",
      "allowed_origins[4]",
      "allowed_origins[5]",
      "allowed_origins[7]",
    ]);
    const created = await h.admin.createSource({
      name: "web shop",
      allowedOrigins: ["HTTPS://Shop.Example.com:443/", "http://localhost:3000", "https://*.example.org"],
    });
    const want = [SHOP, "http://localhost:3000", "https://*.example.org"];
    expect(created.source!.allowedOrigins).toEqual(want);
    expect((await h.admin.getSource({ id: created.source!.id })).source!.allowedOrigins).toEqual(want);
    const updated = await h.admin.updateSource({
      source: { id: created.source!.id, allowedOrigins: [SHOP] },
      updateMask: { paths: ["allowed_origins"] },
    });
    expect(updated.source).toMatchObject({ name: "web shop", allowedOrigins: [SHOP] });
    const renamed = await h.admin.updateSource({
      source: { id: created.source!.id, name: "Shop" },
      updateMask: { paths: ["name"] },
    });
    expect(renamed.source).toMatchObject({ name: "Shop", allowedOrigins: [SHOP] });
    expect(
      fields(
        await failure(
          h.admin.updateSource({
            source: { id: created.source!.id },
            updateMask: { paths: ["write_key_prefix"] },
          }),
        ),
      ),
    ).toEqual(["update_mask.paths[0]"]);
    expect((await failure(h.admin.updateSource({ source: { id: "nope", name: "x" } }))).code).toBe(
      Code.NOT_FOUND,
    );
    const audit = await h.admin.listAuditRecords({ resourceId: created.source!.id });
    const update = audit.records.find((r) => r.changes[0]?.changedFields.includes("allowedOrigins"));
    expect(update?.action).toBe("UpdateSource");
    expect(update?.changes[0]?.afterJson).toContain('"allowedOrigins":["https://shop.example.com"]');
    expect(update?.requestJson).toContain(SHOP);
  });

  it("refuses (403) and stores nothing from an origin the source does not allow; the page cannot read why", async () => {
    const src = await h.admin.createSource({
      name: "locked",
      allowedOrigins: [SHOP, "https://*.example.org"],
    });
    const key = src.writeKey;
    const before = await h.messageCount();
    const call = (id: string) => ({ writeKey: key, userId: "u", event: "E", messageId: id });
    for (const [origin, path, auth] of [
      [EVIL, "/v1/t", undefined],
      [EVIL, "/v1/t", key],
      [EVIL, "/v1/track", key],
      ["https://example.org", "/v1/t", undefined],
      ["https://shop.example.com.evil.net", "/v1/t", undefined],
      ["http://shop.example.com", "/v1/t", undefined],
      ["null", "/v1/t", undefined],
    ] as const) {
      const r = await browserPost(path, call(`denied-${origin}`), origin, auth);
      expect(r.status, `${origin} ${path}`).toBe(403);
      expect(r.body.code).toBe("PERMISSION_DENIED");
      expect(r.headers.get("access-control-allow-origin"), origin).toBeNull();
    }
    const batch = await browserPost(
      "/v1/b",
      { writeKey: key, batch: [{ type: "track", ...call("denied-b") }] },
      EVIL,
    );
    expect(batch.status).toBe(403);
    const settings = await fetch(`${h.httpBase}/v1/projects/${key}/settings`, { headers: { Origin: EVIL } });
    expect(settings.status).toBe(403);
    expect(settings.headers.get("access-control-allow-origin")).toBeNull();
    expect(await h.messageCount()).toBe(before);

    // Allowed origins, a subdomain of a wildcard at any depth, and servers (no Origin) are served.
    for (const origin of [SHOP, "https://a.example.org", "https://a.b.example.org"]) {
      const r = await browserPost("/v1/t", call(`allowed-${origin}`), origin);
      expect(r, origin).toMatchObject(ok);
      expect(r.headers.get("access-control-allow-origin")).toBe(origin);
    }
    expect(await browserPost("/v1/t", call("allowed-server"))).toMatchObject(ok);
    expect(await h.messageCount()).toBe(before + 4);

    // Emptied: any origin again, at once.
    await h.admin.updateSource({
      source: { id: src.source!.id, allowedOrigins: [] },
      updateMask: { paths: ["allowed_origins"] },
    });
    expect(await browserPost("/v1/t", call("now-any"), EVIL)).toMatchObject(ok);
  });
});

describe("429", () => {
  const q = useRateLimitedHarness(0.5);

  it("carries Retry-After and X-RateLimit-Reset (seconds), readable by the page", async () => {
    const { writeKey } = await q.source("limited");
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 5 && refused === undefined; i++) {
      const r = await post(
        q.httpBase,
        "/v1/t",
        { writeKey, userId: "u", event: "E" },
        {
          headers: { "Content-Type": "text/plain", Origin: SHOP },
        },
      );
      if (r.status === 429) refused = r;
    }
    expect(refused, "a call over SOURCE_MAX_RATE").toBeDefined();
    const retryAfter = refused!.headers.get("retry-after");
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(refused!.headers.get("x-ratelimit-reset")).toBe(retryAfter);
    expect(refused!.headers.get("access-control-allow-origin")).toBe(SHOP);
    expect(refused!.headers.get("access-control-expose-headers")).toBe("Retry-After, X-RateLimit-Reset");
    expect(refused!.body.code).toBe("RESOURCE_EXHAUSTED");
  });
});
