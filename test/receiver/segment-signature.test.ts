import { createHmac } from "node:crypto";
import { signSegment, verifySignature } from "@hookpost/receiver";
import { describe, expect, it } from "vitest";

const secret = "shh-its-a-secret";
// Non-ASCII on purpose: the signature covers UTF-8 bytes, not UTF-16 code units.
const body = JSON.stringify({ version: 1, type: "track", userId: "ü1", event: "Café ☕", properties: {} });
const raw = Buffer.from(body, "utf8");

describe("X-Signature", () => {
  it("is lowercase hex HMAC-SHA1 of the body bytes keyed with the secret", () => {
    const sig = signSegment(raw, secret);
    expect(sig).toMatch(/^[0-9a-f]{40}$/);
    expect(sig).toBe(createHmac("sha1", secret).update(raw).digest("hex"));
    expect(signSegment(body, secret)).toBe(sig); // string = its UTF-8 bytes
    expect(signSegment(new Uint8Array(raw), secret)).toBe(sig);
  });

  it("verifies on the raw body as a Buffer, a Uint8Array or a string", () => {
    const sig = signSegment(raw, secret);
    expect(verifySignature(raw, sig, secret)).toBe(true);
    expect(verifySignature(new Uint8Array(raw), sig, secret)).toBe(true);
    expect(verifySignature(body, sig, secret)).toBe(true);
    expect(verifySignature(raw, sig.toUpperCase(), secret)).toBe(true);
    expect(verifySignature(raw, [sig], secret)).toBe(true);
  });

  it("refuses a wrong secret, a tampered body, and missing or malformed headers", () => {
    const sig = signSegment(raw, secret);
    expect(verifySignature(raw, sig, "other-secret")).toBe(false);
    const tampered = Buffer.from(raw);
    tampered[tampered.length - 2] ^= 1;
    expect(verifySignature(tampered, sig, secret)).toBe(false);
    expect(verifySignature(`${body} `, sig, secret)).toBe(false);
    expect(verifySignature(raw, undefined, secret)).toBe(false);
    expect(verifySignature(raw, "", secret)).toBe(false);
    expect(verifySignature(raw, sig.slice(0, 39), secret)).toBe(false);
    expect(verifySignature(raw, `${sig}00`, secret)).toBe(false);
    expect(verifySignature(raw, [sig, sig], secret)).toBe(false);
    expect(verifySignature(raw, sig, "")).toBe(false);
  });
});
