import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Signing } from "../../gen/hookpost/v1/admin_pb.js";
import {
  generateStandardWebhookSecret,
  verifySegmentRequest,
  verifyStandardWebhook,
} from "../../receiver/mod.js";
import { publishCall, type ReceivedRequest, track, waitUntil } from "../dispatcher/helpers.js";
import { waitForRevision } from "../helpers/revisions.js";
import { Stack } from "../helpers/stack.js";

/**
 * RotateSecret through the admin API, delivered by a real dispatcher to a real receiver. A
 * receiver that switches from the old to the new secret at any moment of the overlap never sees
 * a failed verification; after the overlap only the new secret signs.
 */

const OVERLAP_MS = 8000;
let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start();
});

afterAll(async () => {
  await stack?.close();
});

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
  const sourceId = (await stack.source()).id;
  return stack.destination({ ...init, sourceIds: [sourceId] });
}

async function deliver(dest: { id: string; sourceIds: string[] }, count: number): Promise<ReceivedRequest[]> {
  const sourceId = dest.sourceIds[0]!;
  const destinationId = dest.id;
  const calls = Array.from({ length: count }, () => track({ sourceId }));
  for (const c of calls) await publishCall(stack.nc.jetstream(), c);
  const ids = new Set(calls.map((c) => c.messageId));
  const mine = () => stack.receiver.requests.filter((r) => ids.has(String(r.headers["idempotency-key"])));
  await waitUntil(() => mine().length >= count, 20_000, `${count} deliveries to ${destinationId}`);
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

    const rotated = await stack.admin.rotateSecret({
      destinationId: dest.id,
      previousValidFor: durationFromMs(OVERLAP_MS),
    });
    const fresh = rotated.secret;
    expect(fresh).not.toBe(old);
    expect(rotated.destination?.previousSecretExpireTime).toBeDefined();
    const expires = timestampDate(rotated.previousSecretExpireTime!).getTime();
    await waitForRevision(rotated.revision, stack.dispatchers);
    const during = await deliver(dest, 5);
    // The test is only meaningful when these really went out during the overlap.
    for (const r of during) expect(r.at).toBeLessThan(expires);

    await waitUntil(() => Date.now() > expires + 200, OVERLAP_MS + 5000, "the overlap to end");
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
    await expect(stack.admin.rotateSecret({ destinationId: "nope" })).rejects.toThrow(/does not exist/);
    const dest = await newDestination({ sharedSecret: "s" });
    await expect(
      stack.admin.rotateSecret({ destinationId: dest.id, previousValidFor: durationFromMs(-1000) }),
    ).rejects.toThrow(/previous_valid_for/);
    const swh = await newDestination({
      sharedSecret: generateStandardWebhookSecret(),
      signing: Signing.STANDARD_WEBHOOKS,
    });
    await expect(stack.admin.rotateSecret({ destinationId: swh.id, newSecret: "plain" })).rejects.toThrow(
      /whsec_/,
    );
  });

  it("with a zero overlap the previous secret stops at once; the secret given is used", async () => {
    const dest = await newDestination({ sharedSecret: "first" });
    const r = await stack.admin.rotateSecret({
      destinationId: dest.id,
      newSecret: "second",
      previousValidFor: durationFromMs(0),
    });
    expect(r.secret).toBe("second");
    expect(r.previousSecretExpireTime).toBeUndefined();
    await waitForRevision(r.revision, stack.dispatchers);
    const [req] = await deliver(dest, 1);
    expect(verifySegmentRequest(req!.body, req!.headers, "second")).toBe(true);
    expect(verifySegmentRequest(req!.body, req!.headers, "first")).toBe(false);
  });
});
