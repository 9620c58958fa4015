import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { StoredCall } from "@hookpost/contract";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { destination, eventsRouted, pipelineWithReceiver, publishCall, Receiver, track } from "./helpers.js";

/** End to end through NATS: what a receiver gets for each call type, and who gets what. */

const t = pipelineWithReceiver();

const T = "2026-11-21T09:30:00.000Z";
const R = "2026-11-21T09:30:01.250Z";
const sha1 = (secret: string, data: string | Buffer) => createHmac("sha1", secret).update(data).digest("hex");

describe("webhook requests", () => {
  it("sends each type's body byte for byte, with the specified headers and a valid X-Signature", async () => {
    const secret = "shh-its-a-secret";
    await t.p.putDestination(
      destination({
        id: "types",
        sourceIds: ["web"],
        urls: [t.rx.url("/types")],
        headers: { "X-Api-Key": "static-value", Accept: "application/json" },
        sharedSecret: secret,
      }),
    );
    const base = { sourceId: "web", receivedAt: R };
    const calls: Array<[StoredCall, string]> = [
      [
        {
          ...base,
          messageId: "t-page",
          type: "page",
          timestamp: T,
          userId: "u1",
          name: "Pricing",
          properties: {
            path: "/pricing",
            url: "https://acme.test/pricing",
            title: "Pricing",
            referrer: "https://search.test/",
          },
        },
        `{"version":1,"type":"page","userId":"u1","properties":{"path":"/pricing","url":"https://acme.test/pricing","title":"Pricing","referrer":"https://search.test/","name":"Pricing"},"timestamp":"${T}","context":{}}`,
      ],
      [
        {
          ...base,
          messageId: "t-screen",
          type: "screen",
          timestamp: T,
          userId: "u1",
          name: "Home",
          context: {
            device: { model: "Pixel 8", type: "android" },
            os: { name: "Android", version: "15" },
            app: { build: "42", name: "Acme", version: "1.2.0" },
          },
        },
        `{"version":1,"type":"screen","userId":"u1","name":"Home","timestamp":"${T}","context":{"device":{"model":"Pixel 8","type":"android"},"os":{"name":"Android","version":"15"},"app":{"build":"42","name":"Acme","version":"1.2.0"}}}`,
      ],
      [
        {
          ...base,
          messageId: "t-identify",
          type: "identify",
          timestamp: T,
          userId: "u1",
          anonymousId: "anon-1",
          traits: { name: "Zoë", age: 41 },
        },
        `{"version":1,"type":"identify","userId":"u1","anonymousId":"anon-1","traits":{"name":"Zoë","age":41},"timestamp":"${T}","context":{}}`,
      ],
      [
        {
          ...base,
          messageId: "t-track",
          type: "track",
          timestamp: T,
          anonymousId: "anon-2",
          event: "Order Completed",
          properties: { total: 12.5, items: ["a", "b"] },
          context: { ip: "203.0.113.9" },
          integrations: { All: true },
        },
        `{"version":1,"type":"track","anonymousId":"anon-2","event":"Order Completed","properties":{"total":12.5,"items":["a","b"]},"timestamp":"${T}","context":{"ip":"203.0.113.9"}}`,
      ],
      [
        {
          ...base,
          messageId: "t-alias",
          type: "alias",
          timestamp: T,
          userId: "new-id",
          previousId: "old-id",
        },
        `{"version":1,"type":"alias","timestamp":"${T}","Previous ID":"old-id","User ID":"new-id","context":{}}`,
      ],
      [
        {
          ...base,
          messageId: "t-group",
          type: "group",
          timestamp: T,
          userId: "u1",
          groupId: "acme",
          traits: { "Employee Count": 120 },
        },
        `{"version":1,"type":"group","groupId":"acme","userId":"u1","traits":{"Employee Count":120},"timestamp":"${T}","context":{}}`,
      ],
      [
        // No timestamp of its own: the receive time.
        { ...base, messageId: "t-delete", type: "delete", timestamp: R, userId: "u1" },
        `{"type":"delete","userId":"u1","timestamp":"${R}"}`,
      ],
    ];
    for (const [call] of calls) await publishCall(t.p.js, call);
    await t.rx.waitFor(calls.length);
    await sleep(200); // not a wait: no extra delivery follows (the assertion)
    const got = t.rx.requests.filter((r) => r.url === "/types");
    expect(got).toHaveLength(calls.length);
    for (const [call, expected] of calls) {
      const req = got.find((r) => r.headers["idempotency-key"] === call.messageId)!;
      expect(req, call.type).toBeDefined();
      expect(req.method).toBe("POST");
      expect(req.body.toString("utf8"), call.type).toBe(expected);
      expect(req.headers["content-type"]).toBe("application/json");
      expect(req.headers["user-agent"]).toBe("Hookpost/1.0");
      expect(req.headers["x-api-key"]).toBe("static-value");
      expect(req.headers.accept).toBe("application/json");
      expect(req.headers["content-length"]).toBe(String(Buffer.byteLength(expected)));
      // On the raw bytes, and the way the seed's receivers do it: parse, re-stringify, hash.
      expect(req.headers["x-signature"]).toBe(sha1(secret, req.body));
      expect(req.headers["x-signature"]).toBe(
        sha1(secret, JSON.stringify(JSON.parse(req.body.toString("utf8")))),
      );
      expect(req.headers["webhook-signature"]).toBeUndefined();
    }
  });

  it("signs with Standard Webhooks as well when configured, verified by the reference library", async () => {
    const secret = `whsec_${Buffer.from("hookpost-test-key-0123456789abcd").toString("base64")}`;
    await t.p.putDestination(
      destination({
        id: "stdwh",
        sourceIds: ["std"],
        urls: [t.rx.url("/std")],
        sharedSecret: secret,
        signing: "standard-webhooks",
      }),
    );
    const call = track({
      sourceId: "std",
      messageId: "std-1",
      properties: { emoji: "🎉", quote: 'say "hi"' },
    });
    const before = Math.floor(Date.now() / 1000);
    await publishCall(t.p.js, call);
    await until(() => t.rx.requests.some((r) => r.url === "/std"));
    const req = t.rx.requests.find((r) => r.url === "/std")!;
    const raw = req.body.toString("utf8");
    expect(req.headers["webhook-id"]).toBe("std-1");
    const ts = Number(req.headers["webhook-timestamp"]);
    expect(ts).toBeGreaterThanOrEqual(before);
    expect(ts).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    expect(req.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const verified = new Webhook(secret).verify(raw, {
      "webhook-id": String(req.headers["webhook-id"]),
      "webhook-timestamp": String(req.headers["webhook-timestamp"]),
      "webhook-signature": String(req.headers["webhook-signature"]),
    });
    expect(verified).toEqual(JSON.parse(raw));
    // A tampered body fails.
    expect(() =>
      new Webhook(secret).verify(raw.replace("pro", "free"), {
        "webhook-id": String(req.headers["webhook-id"]),
        "webhook-timestamp": String(req.headers["webhook-timestamp"]),
        "webhook-signature": String(req.headers["webhook-signature"]),
      }),
    ).toThrow();
    expect(req.headers["x-signature"]).toBe(sha1(secret, req.body));
  });

  it("sends no signature headers without a shared secret", async () => {
    await t.p.putDestination(
      destination({ id: "unsigned", sourceIds: ["nosig"], urls: [t.rx.url("/nosig")] }),
    );
    await publishCall(t.p.js, track({ sourceId: "nosig" }));
    await until(() => t.rx.requests.some((r) => r.url === "/nosig"));
    const req = t.rx.requests.find((r) => r.url === "/nosig")!;
    expect(req.headers["x-signature"]).toBeUndefined();
    expect(req.headers["webhook-signature"]).toBeUndefined();
  });
});

describe("routing", () => {
  it("applies the integrations filter (Webhooks, All, case-sensitive; deletes ignore it)", async () => {
    await t.p.putDestination(destination({ id: "filter", sourceIds: ["flt"], urls: [t.rx.url("/filter")] }));
    const cases: Array<[string, Record<string, boolean> | undefined, StoredCall["type"], boolean]> = [
      ["f-none", undefined, "track", true],
      ["f-all-true", { All: true }, "track", true],
      ["f-all-false", { All: false }, "track", false],
      ["f-all-false-wh", { All: false, Webhooks: true }, "identify", true],
      ["f-wh-false", { Webhooks: false }, "track", false],
      ["f-case", { All: false, webhooks: true }, "track", false],
      ["f-other", { Amplitude: false }, "track", true],
      ["f-delete", { All: false, Webhooks: false }, "delete", true],
    ];
    for (const [id, integrations, type] of cases) {
      await publishCall(
        t.p.js,
        track({ sourceId: "flt", messageId: id, type, ...(integrations ? { integrations } : {}) }),
      );
    }
    const expected = cases.filter((c) => c[3]).map((c) => c[0]);
    await until(() => t.rx.requests.filter((r) => r.url === "/filter").length >= expected.length);
    await sleep(500); // not a wait: no filtered call is delivered meanwhile (the assertion)
    const got = t.rx.requests
      .filter((r) => r.url === "/filter")
      .map((r) => String(r.headers["idempotency-key"]));
    expect(got.sort()).toEqual(expected.sort());
  });

  it("delivers to every enabled destination of the source, independently, and to nothing else", async () => {
    const a = await Receiver.http();
    const b = await Receiver.http();
    const off = await Receiver.http();
    const elsewhere = await Receiver.http();
    try {
      await t.p.putDestination(destination({ id: "fan-a", sourceIds: ["fan"], urls: [a.url()] }));
      await t.p.putDestination(destination({ id: "fan-b", sourceIds: ["other", "fan"], urls: [b.url()] }));
      await t.p.putDestination(
        destination({ id: "fan-off", sourceIds: ["fan"], urls: [off.url()], enabled: false }),
      );
      await t.p.putDestination(destination({ id: "fan-x", sourceIds: ["other"], urls: [elsewhere.url()] }));
      for (let i = 0; i < 5; i++)
        await publishCall(t.p.js, track({ sourceId: "fan", messageId: `fan-${i}` }));
      await a.waitFor(5);
      await b.waitFor(5);
      await sleep(500); // not a wait: nothing reaches the other destinations meanwhile (the assertion)
      expect(a.messageIds()).toEqual(new Set(["fan-0", "fan-1", "fan-2", "fan-3", "fan-4"]));
      expect(b.requests).toHaveLength(5);
      expect(off.requests).toHaveLength(0);
      expect(elsewhere.requests).toHaveLength(0);
    } finally {
      await Promise.all([a.close(), b.close(), off.close(), elsewhere.close()]);
    }
  });

  it("stores a redelivered call's fan-out once (Nats-Msg-Id per call and destination)", async () => {
    await t.p.putDestination(destination({ id: "dedup", sourceIds: ["dd"], urls: [t.rx.url("/dedup")] }));
    // The first copy's answer waits until both copies are routed: a destination that has answered
    // fast gets its calls attempted by the router itself (direct delivery, not stored on
    // DELIVERIES, so no Nats-Msg-Id), which the second copy would be had it been routed after it.
    let release!: () => void;
    const routed = new Promise<void>((resolve) => {
      release = resolve;
    });
    const restore = t.rx.answerAt("/dedup", () => ({ status: 200, after: routed }));
    try {
      const call = track({ sourceId: "dd", messageId: "dup-1" });
      // The same call published twice past EVENTS' own dedup (another id): fan-out ids still match.
      await t.p.js.publish(`hookpost.events.dd.track`, JSON.stringify(call), { msgID: "a" });
      await t.p.js.publish(`hookpost.events.dd.track`, JSON.stringify(call), { msgID: "b" });
      await eventsRouted(t.p.jsm, "dd");
      release();
      await until(() => t.rx.requests.some((r) => r.url === "/dedup"));
      await sleep(700); // not a wait: no second copy is delivered meanwhile (the assertion)
      expect(t.rx.requests.filter((r) => r.url === "/dedup")).toHaveLength(1);
    } finally {
      release();
      restore();
    }
  });
});
