import { createPublicKey, verify } from "node:crypto";
import type { DestinationRecord } from "@hookpost/core";
import { signatureHeaders } from "@hookpost/dispatcher";
import {
  generateStandardWebhookKeyPair,
  generateStandardWebhookSecret,
  signStandardWebhook,
  standardWebhookHeaders,
  standardWebhookPublicKey,
  verifyStandardWebhook,
  WebhookVerificationError,
  type WebhookVerificationErrorCode,
} from "@hookpost/receiver";
import { describe, expect, it } from "vitest";
import { thrown } from "../helpers/thrown.js";

/**
 * Standard Webhooks asymmetric signatures (`v1a,`, Ed25519, `whsk_` / `whpk_` keys): signing and
 * verifying with the receiver package, and the dispatcher's headers during a rotation (units; the
 * end-to-end test is test/lifecycle/ed25519-signing.test.ts).
 */

const body = JSON.stringify({ version: 1, type: "track", event: "Café ☕", userId: "u1" });
const id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
const { secretKey, publicKey } = generateStandardWebhookKeyPair();

// RFC 8032 section 7.1, test 1: a private key and its public key.
const RFC_PRIVATE = Buffer.from("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "hex");
const RFC_PUBLIC = Buffer.from("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "hex");

/** The error `fn` was refused with. */
function refused(fn: () => unknown): WebhookVerificationError {
  return thrown(fn, WebhookVerificationError);
}

const refusal = (fn: () => unknown): WebhookVerificationErrorCode => refused(fn).code;

describe("Ed25519 keys", () => {
  it("are whsk_ + base64 of the 32-byte private key and whpk_ + base64 of the public key", () => {
    expect(secretKey).toMatch(/^whsk_[A-Za-z0-9+/]{43}=$/);
    expect(publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(standardWebhookPublicKey(secretKey)).toBe(publicKey);
    expect(generateStandardWebhookKeyPair().secretKey).not.toBe(secretKey);
  });

  it("derive the RFC 8032 public key, from the 32-byte form and the 64-byte private-then-public form", () => {
    const expected = `whpk_${RFC_PUBLIC.toString("base64")}`;
    expect(standardWebhookPublicKey(`whsk_${RFC_PRIVATE.toString("base64")}`)).toBe(expected);
    const long = `whsk_${Buffer.concat([RFC_PRIVATE, RFC_PUBLIC]).toString("base64")}`;
    expect(standardWebhookPublicKey(long)).toBe(expected);
    // Both forms sign alike (Ed25519 signatures are deterministic).
    expect(signStandardWebhook(id, 1, body, long)).toBe(
      signStandardWebhook(id, 1, body, `whsk_${RFC_PRIVATE.toString("base64")}`),
    );
  });

  it("refuse malformed keys without quoting them", () => {
    const mismatched = `whsk_${Buffer.concat([RFC_PRIVATE, Buffer.alloc(32, 7)]).toString("base64")}`;
    const short = `whsk_${Buffer.alloc(31, 9).toString("base64")}`;
    for (const bad of ["whsk_", "whsk_not base64!", short, mismatched]) {
      const err = refused(() => signStandardWebhook(id, 1, body, bad));
      expect(err.code).toBe("invalid_secret");
      if (bad !== "whsk_") expect(err.message).not.toContain(bad.slice(5, 20));
    }
    const headers = standardWebhookHeaders(id, body, secretKey);
    for (const bad of ["whpk_", `whpk_${Buffer.alloc(33).toString("base64")}`, "whpk_@@@@"]) {
      expect(refusal(() => verifyStandardWebhook(body, headers, bad))).toBe("invalid_secret");
    }
  });
});

describe("v1a signatures", () => {
  it("sign id.timestamp.body with Ed25519, verifiable with the raw public key alone", () => {
    const sig = signStandardWebhook(id, 1674087231, body, secretKey);
    expect(sig).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    // Checked with Node's crypto straight from the 32 public key bytes: no helper of ours involved.
    const raw = Buffer.from(publicKey.slice("whpk_".length), "base64");
    const key = createPublicKey({
      key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") },
      format: "jwk",
    });
    const content = Buffer.from(`${id}.1674087231.${body}`, "utf8");
    expect(verify(null, content, key, Buffer.from(sig.slice(4), "base64"))).toBe(true);
  });

  it("verify with the public key, from a raw body, Node headers or fetch Headers", () => {
    const headers = standardWebhookHeaders(id, body, secretKey);
    expect(headers["webhook-signature"]).toMatch(/^v1a,/);
    const at = new Date(Number(headers["webhook-timestamp"]) * 1000);
    expect(verifyStandardWebhook(body, headers, publicKey)).toEqual({ id, timestamp: at });
    expect(verifyStandardWebhook(Buffer.from(body), new Headers({ ...headers }), publicKey).id).toBe(id);
    const mixedCase = {
      "Webhook-Id": headers["webhook-id"],
      "Webhook-Timestamp": headers["webhook-timestamp"],
      "Webhook-Signature": headers["webhook-signature"],
    };
    expect(verifyStandardWebhook(body, mixedCase, [publicKey]).id).toBe(id);
  });

  it("refuse a tampered body, id or timestamp, a wrong key and a forged signature", () => {
    const headers = standardWebhookHeaders(id, body, secretKey);
    const other = generateStandardWebhookKeyPair().publicKey;
    expect(refusal(() => verifyStandardWebhook(`${body} `, headers, publicKey))).toBe("invalid_signature");
    expect(refusal(() => verifyStandardWebhook(body.replace("u1", "u2"), headers, publicKey))).toBe(
      "invalid_signature",
    );
    expect(
      refusal(() => verifyStandardWebhook(body, { ...headers, "webhook-id": "msg_other" }, publicKey)),
    ).toBe("invalid_signature");
    const ts = String(Number(headers["webhook-timestamp"]) - 1);
    expect(
      refusal(() => verifyStandardWebhook(body, { ...headers, "webhook-timestamp": ts }, publicKey)),
    ).toBe("invalid_signature");
    expect(refusal(() => verifyStandardWebhook(body, headers, other))).toBe("invalid_signature");
    // A signature made with another private key, and bytes that are no signature at all.
    const forged = standardWebhookHeaders(id, body, generateStandardWebhookKeyPair().secretKey);
    expect(refusal(() => verifyStandardWebhook(body, forged, publicKey))).toBe("invalid_signature");
    for (const sig of ["v1a,", "v1a,AAAA", `v1a,${Buffer.alloc(64).toString("base64")}`, "v1a,***"]) {
      expect(
        refusal(() => verifyStandardWebhook(body, { ...headers, "webhook-signature": sig }, publicKey)),
      ).toBe("invalid_signature");
    }
    // A v1 (HMAC) signature is no v1a signature, whatever key made it.
    const hmac = standardWebhookHeaders(id, body, generateStandardWebhookSecret());
    expect(() => verifyStandardWebhook(body, hmac, publicKey)).toThrow(/no v1a signature/);
  });

  it("refuse an expired timestamp, or one too far ahead (replay protection), however well signed", () => {
    const now = new Date("2026-11-21T09:30:00.000Z");
    /** Whether a request signed `offsetS` seconds from `now` verifies, else why not. */
    const verdict = (offsetS: number, toleranceSeconds?: number) => {
      const headers = standardWebhookHeaders(id, body, secretKey, new Date(now.getTime() + offsetS * 1000));
      const options = toleranceSeconds === undefined ? { now } : { now, toleranceSeconds };
      try {
        return verifyStandardWebhook(body, headers, publicKey, options).id === id ? "ok" : "?";
      } catch (err) {
        return (err as WebhookVerificationError).code;
      }
    };
    expect([-3600, -301, -299, 0, 299, 301].map((s) => verdict(s))).toEqual([
      "timestamp_too_old",
      "timestamp_too_old",
      "ok",
      "ok",
      "ok",
      "timestamp_too_new",
    ]);
    expect(verdict(-301, 600)).toBe("ok");
  });

  it("a private key given to verify is refused: receivers verify with the public key", () => {
    const headers = standardWebhookHeaders(id, body, secretKey);
    const err = refused(() => verifyStandardWebhook(body, headers, [publicKey, secretKey]));
    expect(err.code).toBe("invalid_secret");
    expect(err.message).toMatch(/whpk_ public key/);
    expect(err.message).not.toContain(secretKey.slice(5));
  });

  it("mix with v1 in one header and one key list: each signature is checked with the keys of its scheme", () => {
    const whsec = generateStandardWebhookSecret();
    const seconds = Math.floor(Date.now() / 1000);
    const headers = {
      "webhook-id": id,
      "webhook-timestamp": String(seconds),
      "webhook-signature": [
        signStandardWebhook(id, seconds, body, whsec),
        signStandardWebhook(id, seconds, body, secretKey),
      ].join(" "),
    };
    expect(verifyStandardWebhook(body, headers, whsec).id).toBe(id);
    expect(verifyStandardWebhook(body, headers, publicKey).id).toBe(id);
    expect(verifyStandardWebhook(body, headers, [generateStandardWebhookSecret(), publicKey]).id).toBe(id);
    expect(() =>
      verifyStandardWebhook(body, headers, [
        generateStandardWebhookSecret(),
        generateStandardWebhookKeyPair().publicKey,
      ]),
    ).toThrow(/no v1 or v1a signature/);
  });
});

describe("a rotation's overlap (the dispatcher's headers)", () => {
  const now = new Date();
  const until = new Date(now.getTime() + 60_000);
  const previous = generateStandardWebhookKeyPair();
  const current = generateStandardWebhookKeyPair();
  const dest = (over: Partial<DestinationRecord> = {}): DestinationRecord => ({
    id: "d",
    name: "d",
    sourceIds: ["s"],
    urls: ["http://127.0.0.1/"],
    headers: {},
    signing: "standard-webhooks-ed25519",
    enabled: true,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    sharedSecret: current.secretKey,
    previousSecret: previous.secretKey,
    previousSecretExpiresAt: until.toISOString(),
    ...over,
  });
  const raw = Buffer.from(body, "utf8");

  it("during it: a v1a signature per key, the new one first; either public key verifies; no X-Signature", () => {
    const h = signatureHeaders(dest(), raw, "m1", now);
    expect(Object.keys(h).sort()).toEqual(["webhook-id", "webhook-signature", "webhook-timestamp"]);
    const sigs = h["webhook-signature"]!.split(" ");
    expect(sigs).toHaveLength(2);
    expect(sigs.every((s) => s.startsWith("v1a,"))).toBe(true);
    expect(sigs[0]).toBe(signStandardWebhook("m1", now, raw, current.secretKey));
    for (const k of [current.publicKey, previous.publicKey, [current.publicKey, previous.publicKey]]) {
      expect(verifyStandardWebhook(raw, h, k, { now }).id).toBe("m1");
    }
    expect(
      refusal(() => verifyStandardWebhook(raw, h, generateStandardWebhookKeyPair().publicKey, { now })),
    ).toBe("invalid_signature");
  });

  it("after it: only the new key signs", () => {
    const after = new Date(until.getTime() + 1);
    const h = signatureHeaders(dest(), raw, "m1", after);
    expect(h["webhook-signature"]!.split(" ")).toHaveLength(1);
    expect(verifyStandardWebhook(raw, h, current.publicKey, { now: after }).id).toBe("m1");
    expect(refusal(() => verifyStandardWebhook(raw, h, previous.publicKey, { now: after }))).toBe(
      "invalid_signature",
    );
  });

  it("a secret that is no whsk_ key fails the request instead of signing another scheme", () => {
    const whsec = generateStandardWebhookSecret();
    expect(() => signatureHeaders(dest({ sharedSecret: whsec }), raw, "m1", now)).toThrow(/needs whsk_ keys/);
    expect(() => signatureHeaders(dest({ previousSecret: whsec }), raw, "m1", now)).toThrow(
      /needs whsk_ keys/,
    );
    let message = "";
    try {
      signatureHeaders(dest({ sharedSecret: "whsk_broken" }), raw, "m1", now);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/whsk_/);
    expect(message).not.toContain("broken");
  });
});
