import type { StoredCall } from "@hookpost/contract";
import {
  AddressPolicy,
  backoffMs,
  decide,
  dispatcherConfigFromEnv,
  parseRetryAfter,
  parseStoredCall,
  renderBody,
  webhooksEnabled,
} from "@hookpost/dispatcher";
import { describe, expect, it } from "vitest";

const T = "2026-11-21T09:30:00.000Z";
const base = { messageId: "m1", sourceId: "s1", receivedAt: "2026-11-21T09:31:00.000Z", timestamp: T };

describe("body", () => {
  it("renders every type with exactly the specified keys, in order", () => {
    const cases: Array<[StoredCall, string]> = [
      [
        { ...base, type: "track", userId: "u1", event: "Signed Up", properties: { plan: "pro", n: 2 } },
        `{"version":1,"type":"track","userId":"u1","event":"Signed Up","properties":{"plan":"pro","n":2},"timestamp":"${T}","context":{}}`,
      ],
      [
        { ...base, type: "identify", anonymousId: "a1", traits: { email: "x@example.com", logins: 3 } },
        `{"version":1,"type":"identify","anonymousId":"a1","traits":{"email":"x@example.com","logins":3},"timestamp":"${T}","context":{}}`,
      ],
      [
        {
          ...base,
          type: "screen",
          userId: "u1",
          anonymousId: "a1",
          name: "Dashboard",
          context: { device: { model: "iPhone", type: "ios" }, os: { name: "iOS", version: "17" } },
        },
        `{"version":1,"type":"screen","userId":"u1","anonymousId":"a1","name":"Dashboard","timestamp":"${T}","context":{"device":{"model":"iPhone","type":"ios"},"os":{"name":"iOS","version":"17"}}}`,
      ],
      [
        {
          ...base,
          type: "page",
          userId: "u1",
          name: "Home",
          category: "Docs",
          properties: { url: "https://x.test/", title: "X", referrer: "", path: "/" },
        },
        `{"version":1,"type":"page","userId":"u1","properties":{"url":"https://x.test/","title":"X","referrer":"","path":"/","name":"Home","category":"Docs"},"timestamp":"${T}","context":{}}`,
      ],
      [
        { ...base, type: "alias", userId: "new", previousId: "old", context: { ip: "1.2.3.4" } },
        `{"version":1,"type":"alias","timestamp":"${T}","Previous ID":"old","User ID":"new","context":{"ip":"1.2.3.4"}}`,
      ],
      [
        { ...base, type: "alias", userId: "new", previousId: "old", anonymousId: "a9" },
        `{"version":1,"type":"alias","timestamp":"${T}","Previous ID":"old","User ID":"new","anonymousId":"a9","context":{}}`,
      ],
      [
        { ...base, type: "group", userId: "u1", groupId: "g1", traits: { "Company Name": "Acme" } },
        `{"version":1,"type":"group","groupId":"g1","userId":"u1","traits":{"Company Name":"Acme"},"timestamp":"${T}","context":{}}`,
      ],
      [
        { ...base, type: "delete", userId: "u1", context: { a: 1 } },
        `{"type":"delete","userId":"u1","timestamp":"${T}"}`,
      ],
    ];
    for (const [call, expected] of cases) expect(renderBody(call)).toBe(expected);
  });

  it("merges page name/category only where properties lack them, and omits what was not carried", () => {
    expect(
      renderBody({
        ...base,
        type: "page",
        userId: "u1",
        name: "Home",
        category: "C",
        properties: { name: "Own" },
      }),
    ).toBe(
      `{"version":1,"type":"page","userId":"u1","properties":{"name":"Own","category":"C"},"timestamp":"${T}","context":{}}`,
    );
    expect(renderBody({ ...base, type: "page", anonymousId: "a1", name: "Home" })).toBe(
      `{"version":1,"type":"page","anonymousId":"a1","properties":{"name":"Home"},"timestamp":"${T}","context":{}}`,
    );
    expect(renderBody({ ...base, type: "page", userId: "u1" })).toBe(
      `{"version":1,"type":"page","userId":"u1","timestamp":"${T}","context":{}}`,
    );
    // Null inside traits is data (a computed trait that went away); top-level absence is omission.
    expect(renderBody({ ...base, type: "identify", userId: "u1", traits: { vip: null } })).toBe(
      `{"version":1,"type":"identify","userId":"u1","traits":{"vip":null},"timestamp":"${T}","context":{}}`,
    );
  });

  it("writes timestamps as ISO 8601 UTC with milliseconds, falling back to the receive time", () => {
    expect(renderBody({ ...base, type: "delete", userId: "u", timestamp: "2026-11-21T10:30:00+01:00" })).toBe(
      `{"type":"delete","userId":"u","timestamp":"2026-11-21T09:30:00.000Z"}`,
    );
    expect(renderBody({ ...base, type: "delete", userId: "u", timestamp: "garbage" })).toBe(
      `{"type":"delete","userId":"u","timestamp":"2026-11-21T09:31:00.000Z"}`,
    );
  });

  it("refuses unreadable events", () => {
    const enc = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));
    expect(parseStoredCall(enc("{nope"))).toBe("not JSON");
    expect(parseStoredCall(enc({ ...base, type: "bogus" }))).toBe("unknown type");
    expect(parseStoredCall(enc({ ...base, type: "track", messageId: "" }))).toBe("no messageId");
    expect(typeof parseStoredCall(enc({ ...base, type: "track", event: "x", userId: "u" }))).toBe("object");
  });
});

describe("integrations filter", () => {
  const call = (integrations?: Record<string, boolean>, type: StoredCall["type"] = "track"): StoredCall => ({
    ...base,
    type,
    userId: "u",
    event: "e",
    ...(integrations ? { integrations } : {}),
  });
  it.each([
    [undefined, true],
    [{}, true],
    [{ All: true }, true],
    [{ All: false }, false],
    [{ All: false, Webhooks: true }, true],
    [{ Webhooks: false }, false],
    [{ All: true, Webhooks: false }, false],
    [{ All: false, webhooks: true }, false], // case-sensitive
    [{ Mixpanel: false }, true],
  ])("%j -> %s", (integrations, expected) => {
    expect(webhooksEnabled(call(integrations))).toBe(expected);
  });
  it("ignores integrations on deletion notices", () => {
    expect(webhooksEnabled(call({ All: false, Webhooks: false }, "delete"))).toBe(true);
  });
});

describe("retry math", () => {
  const policy = { baseDelayMs: 1000, maxDelayMs: 15 * 60_000, windowMs: 4 * 3_600_000 };
  it("doubles from the base delay up to the cap, with jitter in the upper half", () => {
    const inf = Number.POSITIVE_INFINITY;
    expect(backoffMs(1, policy, inf, () => 0)).toBe(500);
    expect(backoffMs(1, policy, inf, () => 1)).toBe(1000);
    expect(backoffMs(4, policy, inf, () => 1)).toBe(8000);
    expect(backoffMs(40, policy, inf, () => 1)).toBe(15 * 60_000);
    expect(backoffMs(40, policy, inf, () => 0)).toBe(7.5 * 60_000);
  });
  it("keeps the delay near the time already spent, whatever the delivery count says", () => {
    // 20 deliveries (hand-backs, crashes) but only 3 s of retrying: next delay about 4 s, not 15 min.
    expect(backoffMs(20, policy, 3000, () => 1)).toBe(4000);
    // An old backlog message failing for the first time still retries after about the base delay.
    expect(backoffMs(1, policy, 3_600_000, () => 1)).toBe(1000);
  });
  it("honours Retry-After (seconds or date) up to the cap", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("120", now)).toBe(120_000);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    const d = decide({
      attempt: 1,
      retryable: true,
      retryAfterMs: 3_600_000,
      firstTimeMs: now,
      nowMs: now,
      policy,
    });
    expect(d).toEqual({ action: "retry", delayMs: 15 * 60_000 });
  });
  it("dead-letters when nothing was retryable or the next attempt would fall outside the window", () => {
    const now = 1_000_000;
    expect(
      decide({ attempt: 1, retryable: false, retryAfterMs: undefined, firstTimeMs: now, nowMs: now, policy }),
    ).toMatchObject({ action: "dead", cause: "not_retryable" });
    const late = decide({
      attempt: 3,
      retryable: true,
      retryAfterMs: undefined,
      firstTimeMs: now - policy.windowMs + 1000,
      nowMs: now,
      policy,
      random: () => 0,
    });
    expect(late).toMatchObject({
      action: "dead",
      cause: "window_exhausted",
      reason: "retry window of 4h exhausted",
    });
  });
});

describe("SSRF address policy", () => {
  const strict = new AddressPolicy();
  it.each([
    "127.0.0.1",
    "127.255.0.9",
    "::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "fe80::1",
    "100.64.0.1",
    "fd00::1",
    "fc00::1",
    "0.0.0.0",
    "::",
    "255.255.255.255",
    "224.0.0.1",
    "ff02::1",
    "240.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "::7f00:1",
    "::127.0.0.1",
    "::a9fe:a9fe",
    "::a00:1",
    "2002:7f00:1::",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",
  ])("refuses %s by default", (ip) => {
    expect(strict.refusal(ip)).toBeDefined();
  });
  it.each(["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])("allows %s", (ip) => {
    expect(strict.refusal(ip)).toBeUndefined();
  });
  it("lets the allow list through, IPv4-mapped forms included, and nothing else", () => {
    const p = new AddressPolicy(["127.0.0.0/8", "::1/128"]);
    expect(p.refusal("127.0.0.1")).toBeUndefined();
    expect(p.refusal("::ffff:127.0.0.1")).toBeUndefined();
    expect(p.refusal("::1")).toBeUndefined();
    expect(p.refusal("10.0.0.1")).toBeDefined();
    expect(p.refusal("0.0.0.0")).toBeDefined();
    expect(() => new AddressPolicy(["not-a-cidr"])).toThrow();
  });
  it("refuses NAT64, 6to4 and Teredo forms embedding a refused IPv4 even when their prefix is allowed", () => {
    const p = new AddressPolicy(["64:ff9b::/96", "2002::/16", "2001::/32"]);
    // Public IPv4 inside: the allowed prefix lets them through.
    expect(p.refusal("64:ff9b::808:808")).toBeUndefined();
    expect(p.refusal("2002:808:808::1")).toBeUndefined();
    expect(p.refusal("2001:0:808:808:8000:63bf:f7f7:f7f7")).toBeUndefined();
    // A loopback, private or metadata IPv4 inside: refused, naming it.
    expect(p.refusal("64:ff9b::7f00:1")).toMatch(/embeds an IPv4 address: 127\.0\.0\.1 is a loopback/);
    expect(p.refusal("64:ff9b:1::a9fe:a9fe")).toMatch(/169\.254\.169\.254 is a linkLocal/);
    expect(p.refusal("2002:a00:1::")).toMatch(/10\.0\.0\.1 is a private/);
    // Teredo: the server (bits 32-63) and the client (last 32 bits, inverted) both count.
    expect(p.refusal("2001:0:7f00:1:8000:63bf:f7f7:f7f7")).toMatch(/127\.0\.0\.1/);
    expect(p.refusal("2001:0:808:808:8000:63bf:80ff:fffe")).toMatch(/127\.0\.0\.1/);
    // IPv4-compatible is judged as its IPv4, like IPv4-mapped.
    expect(new AddressPolicy().refusal("::808:808")).toBeUndefined();
  });
});

describe("configuration", () => {
  it("has the documented defaults", () => {
    const c = dispatcherConfigFromEnv({});
    expect(c).toMatchObject({
      natsUrl: "nats://127.0.0.1:4222",
      webhookTimeoutMs: 5000,
      retryBaseDelayMs: 1000,
      allowedCidrs: [],
      ackWaitMs: 30_000,
      deliveryConcurrency: 16,
      maxAckPending: 1000,
      logLevel: "info",
      opsAddr: "127.0.0.1:9091",
    });
    expect(c.topology.retryWindowMs).toBe(4 * 3_600_000);
    expect(c.topology.retryMaxDelayMs).toBe(15 * 60_000);
    expect(c.caFile).toBeUndefined();
  });
  it("reads durations, lists and limits from the environment", () => {
    const c = dispatcherConfigFromEnv({
      RETRY_WINDOW: "30s",
      RETRY_BASE_DELAY: "250ms",
      RETRY_MAX_DELAY: "10m",
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8, ::1/128",
      WEBHOOK_CA_FILE: "/etc/ca.pem",
      WEBHOOK_TIMEOUT_MS: "300",
      ACK_WAIT: "2s",
      DELIVERY_CONCURRENCY: "4",
      OPS_ADDR: "off",
    });
    expect(c.topology.retryWindowMs).toBe(30_000);
    expect(c.retryBaseDelayMs).toBe(250);
    expect(c.topology.retryMaxDelayMs).toBe(600_000);
    expect(c.allowedCidrs).toEqual(["127.0.0.0/8", "::1/128"]);
    expect(c.caFile).toBe("/etc/ca.pem");
    expect(c.webhookTimeoutMs).toBe(300);
    expect(c.ackWaitMs).toBe(2000);
    expect(c.deliveryConcurrency).toBe(4);
    expect(c.opsAddr).toBeUndefined();
  });
  it.each([
    [{ WEBHOOK_ALLOWED_CIDRS: "10.0.0.0/33" }, /WEBHOOK_ALLOWED_CIDRS/],
    [{ RETRY_WINDOW: "4 hours" }, /RETRY_WINDOW/],
    [{ WEBHOOK_TIMEOUT_MS: "0" }, /WEBHOOK_TIMEOUT_MS/],
    [{ LOG_LEVEL: "loud" }, /LOG_LEVEL/],
    [{ ACK_WAIT: "10ms" }, /ACK_WAIT/],
  ])("refuses %j", (env, message) => {
    expect(() => dispatcherConfigFromEnv(env)).toThrow(message);
  });
});
