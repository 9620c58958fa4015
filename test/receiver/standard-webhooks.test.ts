import {
  generateStandardWebhookSecret,
  signStandardWebhook,
  standardWebhookHeaders,
  standardWebhookKey,
  verifyStandardWebhook,
  WebhookVerificationError,
  type WebhookVerificationErrorCode,
} from "@hookpost/receiver";
import { WebhookVerificationError as TheirError, Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { thrown } from "../helpers/thrown.js";

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const body = JSON.stringify({ version: 1, type: "identify", userId: "u1", traits: { name: "Zoë" } });
const id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";

function refusal(fn: () => unknown): WebhookVerificationErrorCode {
  return thrown(fn, WebhookVerificationError).code;
}

describe("Standard Webhooks", () => {
  it("our signature verifies with the reference library", () => {
    const headers = standardWebhookHeaders(id, body, secret);
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(secret).verify(Buffer.from(body), { ...headers })).toEqual(JSON.parse(body));
    // And theirs fails it with another secret, as it should.
    expect(() => new Webhook(generateStandardWebhookSecret()).verify(body, headers)).toThrow(TheirError);
  });

  it("the reference library's signature verifies with ours", () => {
    const now = new Date();
    const wh = new Webhook(secret);
    const headers = {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": wh.sign(id, now, body),
    };
    expect(verifyStandardWebhook(body, headers, secret)).toEqual({
      id,
      timestamp: new Date(Math.floor(now.getTime() / 1000) * 1000),
    });
    expect(verifyStandardWebhook(Buffer.from(body), headers, secret).id).toBe(id);
    expect(signStandardWebhook(id, now, body, secret)).toBe(wh.sign(id, now, body));
  });

  it("matches the spec's published example", () => {
    // From the Standard Webhooks specification / reference test suite.
    const exampleSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const sig = signStandardWebhook(
      "msg_p5jXN8AQM9LWM0D4loKWxJek",
      1614265330,
      '{"test": 2432232314}',
      exampleSecret,
    );
    expect(sig).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  it("accepts headers from fetch, mixed-case objects, and several signatures", () => {
    const headers = standardWebhookHeaders(id, body, secret);
    expect(verifyStandardWebhook(body, new Headers({ ...headers }), secret).id).toBe(id);
    const mixed = {
      "Webhook-Id": headers["webhook-id"],
      "Webhook-Timestamp": headers["webhook-timestamp"],
      "Webhook-Signature": `v1a,c29tZXRoaW5n v1,bm90IHRoaXMgb25l ${headers["webhook-signature"]}`,
    };
    expect(verifyStandardWebhook(body, mixed, secret).id).toBe(id);
    // A raw key (decoded secret) works the same.
    expect(verifyStandardWebhook(body, headers, standardWebhookKey(secret)).id).toBe(id);
  });

  it("refuses a tampered body, a wrong secret, and missing headers", () => {
    const headers = standardWebhookHeaders(id, body, secret);
    expect(refusal(() => verifyStandardWebhook(`${body} `, headers, secret))).toBe("invalid_signature");
    expect(refusal(() => verifyStandardWebhook(body, headers, generateStandardWebhookSecret()))).toBe(
      "invalid_signature",
    );
    expect(refusal(() => verifyStandardWebhook(body, { ...headers, "webhook-id": "other" }, secret))).toBe(
      "invalid_signature",
    );
    expect(
      refusal(() => verifyStandardWebhook(body, { ...headers, "webhook-signature": "v2,abc" }, secret)),
    ).toBe("invalid_signature");
    const { "webhook-id": _, ...noId } = headers;
    expect(refusal(() => verifyStandardWebhook(body, noId, secret))).toBe("missing_headers");
    expect(
      refusal(() => verifyStandardWebhook(body, { ...headers, "webhook-timestamp": "12ab" }, secret)),
    ).toBe("invalid_timestamp");
    expect(refusal(() => verifyStandardWebhook(body, headers, "whsec_not base64!"))).toBe("invalid_secret");
  });

  it("refuses timestamps outside the tolerance (replay protection)", () => {
    const now = new Date("2026-11-21T09:30:00.000Z");
    const old = standardWebhookHeaders(id, body, secret, new Date(now.getTime() - 301_000));
    expect(refusal(() => verifyStandardWebhook(body, old, secret, { now }))).toBe("timestamp_too_old");
    const ahead = standardWebhookHeaders(id, body, secret, new Date(now.getTime() + 301_000));
    expect(refusal(() => verifyStandardWebhook(body, ahead, secret, { now }))).toBe("timestamp_too_new");
    expect(verifyStandardWebhook(body, old, secret, { now, toleranceSeconds: 600 }).id).toBe(id);
    const edge = standardWebhookHeaders(id, body, secret, new Date(now.getTime() - 299_000));
    expect(verifyStandardWebhook(body, edge, secret, { now }).id).toBe(id);
    // The reference library agrees that a stale request is refused.
    const stale = standardWebhookHeaders(id, body, secret, new Date(Date.now() - 3600_000));
    expect(() => new Webhook(secret).verify(body, stale)).toThrow(/too old/);
  });

  it("generates secrets the reference library accepts", () => {
    const s = generateStandardWebhookSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(standardWebhookKey(s)).toHaveLength(32);
    const headers = standardWebhookHeaders(id, body, s);
    expect(new Webhook(s).verify(body, headers)).toEqual(JSON.parse(body));
  });
});
