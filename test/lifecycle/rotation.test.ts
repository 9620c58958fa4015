import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import type { HookpostError } from "@hookpost/contract";
import { Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { signingSecrets } from "@hookpost/core";
import {
  generateStandardWebhookSecret,
  verifySegmentRequest,
  verifyStandardWebhook,
} from "@hookpost/receiver";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { publishCall, type ReceivedRequest, track } from "../dispatcher/helpers.js";
import { waitForRevision } from "../helpers/revisions.js";
import { ingestClient, type Stack } from "../helpers/stack.js";
import { stackWithStore } from "../helpers/stack-store.js";
import { until } from "../helpers/until.js";

/**
 * RotateSecret through the admin API, delivered by a real dispatcher to a real receiver. A
 * receiver that switches from the old to the new secret at any moment of the overlap never sees
 * a failed verification; after the overlap only the new secret signs.
 */

const OVERLAP_MS = 8000;

const t = stackWithStore();

/** The gRPC code a call ended with ("OK" when it succeeded), and the error. */
async function settle<T>(p: Promise<T>): Promise<{ code: string; value?: T; err?: HookpostError }> {
  try {
    return { code: "OK", value: await p };
  } catch (err) {
    return { code: (err as HookpostError).codeName, err: err as HookpostError };
  }
}

type Verify = (req: ReceivedRequest, secret: string) => boolean;

/** Our helper and the reference library, for each signing. */
const verifiers: Record<"segment" | "standard-webhooks", Record<string, Verify>> = {
  segment: {
    "hookpost/receiver": (req, secret) => verifySegmentRequest(req.body, req.headers, secret),
  },
  "standard-webhooks": {
    "hookpost/receiver": (req, secret) => {
      try {
        verifyStandardWebhook(req.body, req.headers, secret);
        return true;
      } catch {
        return false;
      }
    },
    standardwebhooks: (req, secret) => {
      try {
        new Webhook(secret).verify(req.body.toString("utf8"), req.headers as Record<string, string>);
        return true;
      } catch {
        return false;
      }
    },
  },
};

/** A destination on a source of its own, so that calls reach only it. */
async function newDestination(init: Parameters<Stack["destination"]>[0]) {
  const sourceId = (await t.stack.source()).id;
  return t.stack.destination({ ...init, sourceIds: [sourceId] });
}

async function deliver(dest: { id: string; sourceIds: string[] }, count: number): Promise<ReceivedRequest[]> {
  const sourceId = dest.sourceIds[0]!;
  const destinationId = dest.id;
  const calls = Array.from({ length: count }, () => track({ sourceId }));
  for (const c of calls) await publishCall(t.stack.nc.jetstream(), c);
  const ids = new Set(calls.map((c) => c.messageId));
  const mine = () => t.stack.receiver.requests.filter((r) => ids.has(String(r.headers["idempotency-key"])));
  await until(() => mine().length >= count, {
    timeout: 20_000,
    message: `${count} deliveries to ${destinationId}`,
  });
  return mine();
}

describe.each([
  { signing: "segment" as const, old: "the-old-segment-secret", proto: Signing.SEGMENT },
  {
    signing: "standard-webhooks" as const,
    old: generateStandardWebhookSecret(),
    proto: Signing.STANDARD_WEBHOOKS,
  },
])("secret rotation with $signing signing", ({ signing, old, proto }) => {
  it("signs with both secrets during the overlap, then only with the new one", async () => {
    const dest = await newDestination({ sharedSecret: old, signing: proto });
    const before = await deliver(dest, 3);

    const rotated = await t.stack.admin.rotateSecret({
      destinationId: dest.id,
      previousValidFor: durationFromMs(OVERLAP_MS),
    });
    const fresh = rotated.secret;
    expect(fresh).not.toBe(old);
    expect(rotated.destination?.previousSecretExpireTime).toBeDefined();
    const expires = timestampDate(rotated.previousSecretExpireTime!).getTime();
    await waitForRevision(rotated.revision, t.stack.dispatchers);
    const during = await deliver(dest, 5);
    // The test is only meaningful when these really went out during the overlap.
    for (const r of during) expect(r.at).toBeLessThan(expires);

    await until(() => Date.now() > expires + 200, {
      timeout: OVERLAP_MS + 5000,
      message: "the overlap to end",
    });
    const after = await deliver(dest, 3);

    for (const [name, verify] of Object.entries(verifiers[signing])) {
      // A receiver switching at any moment: old secret before it, new secret from it on.
      const all = [...before, ...during, ...after];
      const moments = [rotated.destination!.updateTime!, ...during.map((r) => r.at)];
      for (const m of moments) {
        const switchAt = typeof m === "number" ? m : timestampDate(m).getTime();
        const failed = all.filter((r) => !verify(r, r.at < switchAt ? old : fresh));
        expect(failed, `${name}: switching at ${new Date(switchAt).toISOString()}`).toHaveLength(0);
      }
      // After the overlap the old secret no longer signs.
      for (const r of after) {
        expect(verify(r, fresh), name).toBe(true);
        expect(verify(r, old), name).toBe(false);
      }
    }

    if (signing === "segment") {
      // A receiver that never switched and reads only X-Signature keeps verifying during the overlap.
      for (const r of during)
        expect(verifySegmentRequest(r.body, { "x-signature": r.headers["x-signature"] }, old)).toBe(true);
      for (const r of after) expect(r.headers["x-signature-next"]).toBeUndefined();
    } else {
      for (const r of during) expect(String(r.headers["webhook-signature"]).split(" ")).toHaveLength(2);
      for (const r of after) expect(String(r.headers["webhook-signature"]).split(" ")).toHaveLength(1);
    }
    // Accepting both while switching is what the receiver helper offers too.
    for (const r of during) expect(verifiers[signing]["hookpost/receiver"]!(r, fresh)).toBe(true);
  });
});

describe("RotateSecret", () => {
  it("refuses an unknown destination, a bad overlap and an invalid secret", async () => {
    await expect(t.stack.admin.rotateSecret({ destinationId: "nope" })).rejects.toThrow(/does not exist/);
    const dest = await newDestination({ sharedSecret: "s" });
    await expect(
      t.stack.admin.rotateSecret({ destinationId: dest.id, previousValidFor: durationFromMs(-1000) }),
    ).rejects.toThrow(/previous_valid_for/);
    const swh = await newDestination({
      sharedSecret: generateStandardWebhookSecret(),
      signing: Signing.STANDARD_WEBHOOKS,
    });
    await expect(t.stack.admin.rotateSecret({ destinationId: swh.id, newSecret: "plain" })).rejects.toThrow(
      /whsec_/,
    );
  });

  it("with a zero overlap the previous secret stops at once; the secret given is used", async () => {
    const dest = await newDestination({ sharedSecret: "first" });
    const r = await t.stack.admin.rotateSecret({
      destinationId: dest.id,
      newSecret: "second",
      previousValidFor: durationFromMs(0),
    });
    expect(r.secret).toBe("second");
    expect(r.previousSecretExpireTime).toBeUndefined();
    await waitForRevision(r.revision, t.stack.dispatchers);
    const [req] = await deliver(dest, 1);
    expect(verifySegmentRequest(req!.body, req!.headers, "second")).toBe(true);
    expect(verifySegmentRequest(req!.body, req!.headers, "first")).toBe(false);
  });
});

describe("a configuration that cannot sign is refused when it is applied", () => {
  it("switching to standard-webhooks while a rotated-out secret that is no whsec_ key still signs is INVALID_ARGUMENT; the destination keeps delivering (finding 1)", async () => {
    const old = "the-old-segment-secret";
    const dest = await newDestination({ sharedSecret: old });
    const fresh = generateStandardWebhookSecret();
    await t.stack.admin.rotateSecret({
      destinationId: dest.id,
      newSecret: fresh,
      previousValidFor: durationFromMs(3600_000),
    });

    const refused = await settle(
      t.stack.admin.updateDestination({
        destination: { id: dest.id, signing: Signing.STANDARD_WEBHOOKS },
        updateMask: { paths: ["signing"] },
      }),
    );
    expect(refused.code).toBe("INVALID_ARGUMENT");
    expect(refused.err?.fieldViolations.map((v) => v.field)).toEqual(["destination.signing"]);
    expect(refused.err?.message).toMatch(/previous secret .* is not a Standard Webhooks secret/);
    expect(refused.err?.message).not.toContain(old);
    // Nothing changed: still Segment-signed with both secrets, and delivering.
    const kept = await t.stack.admin.getDestination({ id: dest.id });
    expect(kept.destination?.signing).toBe(Signing.SEGMENT);
    const [req] = await deliver(dest, 1);
    expect(verifySegmentRequest(req!.body, { "x-signature": req!.headers["x-signature"] }, old)).toBe(true);

    // The ways that work: end the overlap (rotate with previous_valid_for 0), then switch.
    const next = generateStandardWebhookSecret();
    await t.stack.admin.rotateSecret({
      destinationId: dest.id,
      newSecret: next,
      previousValidFor: durationFromMs(0),
    });
    const switched = await t.stack.admin.updateDestination({
      destination: { id: dest.id, signing: Signing.STANDARD_WEBHOOKS },
      updateMask: { paths: ["signing"] },
    });
    await waitForRevision(switched.revision, t.stack.dispatchers);
    const [signed] = await deliver(dest, 1);
    expect(verifiers["standard-webhooks"].standardwebhooks!(signed!, next)).toBe(true);
  });

  it("with standard-webhooks signing, a rotation whose previous secret could not sign is refused (a record stored before the rule)", async () => {
    const src = await t.stack.source();
    const created = await t.stack.destination({
      sourceIds: [src.id],
      sharedSecret: generateStandardWebhookSecret(),
      signing: Signing.STANDARD_WEBHOOKS,
    });
    // Behind the API's back: a current secret that is no whsec_ key.
    const stored = t.store.destination(created.id) ?? (await waitForStored(created.id));
    await t.store.putDestination({ ...stored, sharedSecret: "legacy-secret" });
    const refused = await settle(
      t.stack.admin.rotateSecret({ destinationId: created.id, previousValidFor: durationFromMs(60_000) }),
    );
    expect(refused.code).toBe("INVALID_ARGUMENT");
    expect(refused.err?.fieldViolations.map((v) => v.field)).toEqual(["previous_valid_for"]);
    // Without an overlap the broken secret is simply replaced.
    const ok = await t.stack.admin.rotateSecret({
      destinationId: created.id,
      previousValidFor: durationFromMs(0),
    });
    expect(ok.secret).toMatch(/^whsec_/);
  });
});

async function waitForStored(id: string) {
  await until(() => t.store.destination(id) !== undefined, {
    timeout: 5000,
    message: `destination ${id} in the store`,
  });
  return t.store.destination(id)!;
}

describe("concurrent configuration writes are compare-and-set (finding 6)", () => {
  it("of N concurrent RotateSecret calls, every secret answered signs afterwards; the others answer ABORTED", async () => {
    const dest = await newDestination({ sharedSecret: "the-first-secret" });
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(
        Array.from({ length: 6 }, () =>
          settle(
            t.stack.admin.rotateSecret({ destinationId: dest.id, previousValidFor: durationFromMs(600_000) }),
          ),
        ),
      );
      for (const r of results) expect(["OK", "ABORTED"]).toContain(r.code);
      const answered = results.filter((r) => r.code === "OK").map((r) => r.value!);
      expect(answered.length).toBeGreaterThanOrEqual(1);
      const aborted = results.filter((r) => r.code === "ABORTED");
      for (const r of aborted) expect(r.err?.message).toMatch(/changed by another call/);

      // The stored record (read from the bucket) signs with every secret answered...
      const last = answered.map((a) => a.revision).reduce((a, b) => (a > b ? a : b));
      await until(() => t.store.revision >= Number(last), {
        timeout: 5000,
        message: "the store to see the rotations",
      });
      const valid = signingSecrets(t.store.destination(dest.id)!);
      for (const a of answered) expect(valid, `round ${round}`).toContain(a.secret);
      // ...and so does every real delivery.
      await waitForRevision(last, t.stack.dispatchers);
      const [req] = await deliver(dest, 1);
      for (const a of answered) expect(verifySegmentRequest(req!.body, req!.headers, a.secret)).toBe(true);
    }
  });

  it("concurrent read-modify-write updates of one destination are all applied, none lost", async () => {
    const dest = await newDestination({ sharedSecret: "s-1" });
    const results = await Promise.all([
      settle(
        t.stack.admin.updateDestination({
          destination: { id: dest.id, name: "renamed" },
          updateMask: { paths: ["name"] },
        }),
      ),
      settle(
        t.stack.admin.updateDestination({
          destination: { id: dest.id, headers: { "X-Team": "growth" } },
          updateMask: { paths: ["headers"] },
        }),
      ),
      settle(
        t.stack.admin.updateDestination({
          destination: { id: dest.id, rateLimitPerSecond: 50 },
          updateMask: { paths: ["rate_limit_per_second"] },
        }),
      ),
      settle(t.stack.admin.rotateSecret({ destinationId: dest.id, newSecret: "s-2" })),
      settle(
        t.stack.admin.updateDestination({
          destination: { id: dest.id, maxInFlight: 7 },
          updateMask: { paths: ["max_in_flight"] },
        }),
      ),
    ]);
    expect(results.map((r) => r.code)).toEqual(["OK", "OK", "OK", "OK", "OK"]);
    const last = results
      .map((r) => (r.value as { revision: bigint }).revision)
      .reduce((a, b) => (a > b ? a : b));
    await until(() => t.store.revision >= Number(last), {
      timeout: 5000,
      message: "the store to see the updates",
    });
    const stored = t.store.destination(dest.id)!;
    expect(stored.name).toBe("renamed");
    expect(stored.headers).toEqual({ "X-Team": "growth" });
    expect(stored.rateLimitPerSecond).toBe(50);
    expect(stored.maxInFlight).toBe(7);
    expect(stored.sharedSecret).toBe("s-2");
    expect(stored.previousSecret).toBe("s-1");
  });

  it("of N concurrent RotateWriteKey calls, every key answered is accepted by ingest; the others answer ABORTED", async () => {
    const src = await t.stack.source();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => settle(t.stack.admin.rotateWriteKey({ id: src.id }))),
    );
    for (const r of results) expect(["OK", "ABORTED"]).toContain(r.code);
    const keys = results.filter((r) => r.code === "OK").map((r) => r.value!.writeKey);
    expect(keys.length).toBeGreaterThanOrEqual(1);
    for (const key of keys) {
      const client = ingestClient(t.stack.ingest.address, key);
      try {
        const { messageId } = await client.track({ userId: "u-1", event: "Key Works" });
        expect(messageId).not.toBe("");
      } finally {
        client.close();
      }
    }
  });
});
