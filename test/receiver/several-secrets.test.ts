import type { DestinationRecord } from "@hookpost/core";
import { signatureHeaders } from "@hookpost/dispatcher";
import {
  generateStandardWebhookSecret,
  signSegment,
  verifySegmentRequest,
  verifySignature,
  verifyStandardWebhook,
} from "@hookpost/receiver";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";

/** Signing with the secrets of a rotation, and verifying with either (units; the end-to-end test is in test/lifecycle). */

const body = Buffer.from('{"version":1,"type":"track","event":"Café ☕"}', "utf8");
const now = new Date("2026-11-23T08:00:00Z");

function dest(signing: DestinationRecord["signing"], current: string, previous?: string, until?: Date) {
  return {
    id: "d",
    name: "d",
    sourceIds: ["s"],
    urls: ["http://127.0.0.1/"],
    headers: {},
    signing,
    enabled: true,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    sharedSecret: current,
    ...(previous ? { previousSecret: previous, previousSecretExpiresAt: until!.toISOString() } : {}),
  } satisfies DestinationRecord;
}

describe("signing during a rotation", () => {
  const later = new Date(now.getTime() + 60_000);

  it("segment: X-Signature keeps the old secret, X-Signature-Next carries the new one", () => {
    const h = signatureHeaders(dest("segment", "new", "old", later), body, "m1", now);
    expect(h["X-Signature"]).toBe(signSegment(body, "old"));
    expect(h["X-Signature-Next"]).toBe(signSegment(body, "new"));
    for (const s of ["old", "new", ["new", "old"]]) expect(verifySegmentRequest(body, h, s)).toBe(true);
    expect(verifySegmentRequest(body, h, "other")).toBe(false);
    expect(verifySignature(body, h["X-Signature"], ["other", "old"])).toBe(true);
  });

  it("segment: after the overlap only the new secret signs", () => {
    const h = signatureHeaders(
      dest("segment", "new", "old", later),
      body,
      "m1",
      new Date(later.getTime() + 1),
    );
    expect(h["X-Signature"]).toBe(signSegment(body, "new"));
    expect(h["X-Signature-Next"]).toBeUndefined();
    expect(verifySegmentRequest(body, h, "old")).toBe(false);
  });

  it("standard webhooks: two v1 signatures, accepted with either secret by us and the reference library", () => {
    const [oldSecret, newSecret] = [generateStandardWebhookSecret(), generateStandardWebhookSecret()];
    const h = signatureHeaders(
      dest("standard-webhooks", newSecret, oldSecret, new Date(Date.now() + 60_000)),
      body,
      "m1",
      new Date(),
    );
    expect(h["webhook-signature"]!.split(" ")).toHaveLength(2);
    for (const s of [oldSecret, newSecret]) {
      expect(verifyStandardWebhook(body, h, s).id).toBe("m1");
      expect(() => new Webhook(s).verify(body.toString("utf8"), h)).not.toThrow();
    }
    expect(verifyStandardWebhook(body, h, [generateStandardWebhookSecret(), newSecret]).id).toBe("m1");
    expect(() => verifyStandardWebhook(body, h, [generateStandardWebhookSecret()])).toThrow(
      /no v1 signature/,
    );
    expect(() => verifyStandardWebhook(body, h, [])).toThrow(/no secret/);
  });
});
