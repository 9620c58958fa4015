import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { type Destination, Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { verifyStandardWebhook } from "@hookpost/receiver";
import { beforeAll, describe, expect, it } from "vitest";
import type { ReceivedRequest } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import type { IngestClient } from "../helpers/stack.js";
import { stackWithStore } from "../helpers/stack-store.js";
import { until } from "../helpers/until.js";

/**
 * Ed25519 signatures end to end: a real nats-server, the API (ingest and admin) and a dispatcher,
 * calls sent over gRPC, and a real HTTP receiver that verifies every request with the receiver
 * package, trusting only the public keys the admin API returned (it answers 401 otherwise, which
 * would show as failed attempts). A rotation keeps both keys signing for the overlap, so a receiver
 * switching keys at any moment never fails a verification.
 */

const OVERLAP_MS = 8000;

const t = stackWithStore();

/** What the receiver trusts, per URL path: the whpk_ keys the admin API showed for it. */
const trusted = new Map<string, string[]>();
/** The receiver's verdict on each request (by its number). */
const verdicts = new Map<number, boolean>();

function verifies(req: ReceivedRequest, keys: readonly string[]): boolean {
  try {
    verifyStandardWebhook(req.body, req.headers, keys);
    return true;
  } catch {
    return false;
  }
}

beforeAll(() => {
  t.stack.receiver.respond = (req) => {
    const keys = trusted.get(req.url);
    if (keys === undefined) return { status: 200 };
    const ok = verifies(req, keys);
    verdicts.set(req.n, ok);
    return ok ? { status: 200 } : { status: 401, body: "signature does not verify" };
  };
});

let paths = 0;

/** A destination with Ed25519 signing and no key given, on a source and URL path of its own. */
async function ed25519Destination(): Promise<{ dest: Destination; path: string; client: IngestClient }> {
  const source = await t.stack.source();
  const path = `/ed25519-${++paths}`;
  const dest = await t.stack.destination({
    sourceIds: [source.id],
    urls: [t.stack.receiver.url(path)],
    signing: Signing.STANDARD_WEBHOOKS_ED25519,
  });
  trusted.set(path, [...dest.signingPublicKeys]);
  return { dest, path, client: source.client };
}

/** Sends `count` calls over gRPC; returns their requests once each was answered 2xx. */
async function deliver(client: IngestClient, count: number): Promise<ReceivedRequest[]> {
  const ids = new Set<string>();
  for (let i = 0; i < count; i++) {
    ids.add((await client.track({ userId: `u-${i}`, event: "Order Completed" })).messageId);
  }
  const mine = () => t.stack.receiver.requests.filter((r) => ids.has(String(r.headers["idempotency-key"])));
  await until(() => mine().filter((r) => verdicts.get(r.n) === true).length >= count, {
    timeout: 20_000,
    message: `${count} verified deliveries`,
  });
  return mine();
}

describe("Ed25519 (v1a) signatures", () => {
  it("a receiver verifies every request with the public key from the admin API, and nothing else", async () => {
    const { dest, path, client } = await ed25519Destination();
    expect(dest.signingPublicKeys).toHaveLength(1);
    expect(dest.signingPublicKeys[0]).toMatch(/^whpk_/);
    const got = await deliver(client, 3);
    // Every request this destination sent was verified: none was refused and retried.
    expect(got).toHaveLength(3);
    for (const r of got) {
      expect(r.url).toBe(path);
      expect(verdicts.get(r.n)).toBe(true);
      expect(String(r.headers["webhook-signature"])).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
      expect(r.headers["webhook-id"]).toBe(r.headers["idempotency-key"]);
      // No shared secret, so no X-Signature.
      expect(r.headers["x-signature"]).toBeUndefined();
      expect(r.headers["x-signature-next"]).toBeUndefined();
    }
    // Attempt records are stored without waiting: read them once all three are in.
    const attempts = await until(
      async () => {
        const a = (await t.stack.admin.listAttempts({ destinationId: dest.id })).attempts;
        return a.length >= 3 && a;
      },
      { message: "3 attempt records" },
    );
    expect(attempts.map((a) => a.status)).toEqual([200, 200, 200]);
  });

  it("a rotation signs with both keys during the overlap, then with the new one only", async () => {
    const { dest, path, client } = await ed25519Destination();
    const [oldKey] = dest.signingPublicKeys as [string];
    const before = await deliver(client, 3);

    const rotated = await t.stack.admin.rotateSecret({
      destinationId: dest.id,
      previousValidFor: durationFromMs(OVERLAP_MS),
    });
    // The private key is never answered; the receiver learns the new public key from the API.
    expect(rotated.secret).toBe("");
    const [newKey, previous] = rotated.destination!.signingPublicKeys;
    expect(previous).toBe(oldKey);
    expect(newKey).not.toBe(oldKey);
    trusted.set(path, [...rotated.destination!.signingPublicKeys]);
    const expires = timestampDate(rotated.previousSecretExpireTime!).getTime();
    await waitForRevision(rotated.revision, t.stack.dispatchers);
    const during = await deliver(client, 5);
    // The test is only meaningful when these really went out during the overlap.
    for (const r of during) {
      expect(r.at).toBeLessThan(expires);
      const sigs = String(r.headers["webhook-signature"]).split(" ");
      expect(sigs).toHaveLength(2);
      expect(sigs.every((s) => s.startsWith("v1a,"))).toBe(true);
    }

    await until(() => Date.now() > expires + 200, {
      timeout: OVERLAP_MS + 5000,
      message: "the overlap to end",
    });
    const now = (await t.stack.admin.getDestination({ id: dest.id })).destination!;
    expect(now.signingPublicKeys).toEqual([newKey]);
    expect(now.previousSecretExpireTime).toBeUndefined();
    trusted.set(path, [...now.signingPublicKeys]);
    const after = await deliver(client, 3);
    for (const r of after) expect(String(r.headers["webhook-signature"]).split(" ")).toHaveLength(1);

    // A receiver that trusts one key and switches to the new one at any moment never fails.
    const all = [...before, ...during, ...after];
    const moments = [timestampDate(rotated.destination!.updateTime!).getTime(), ...during.map((r) => r.at)];
    for (const switchAt of moments) {
      const failed = all.filter((r) => !verifies(r, [r.at < switchAt ? oldKey : newKey!]));
      expect(failed, `switching at ${new Date(switchAt).toISOString()}`).toHaveLength(0);
    }
    // After the overlap the old key no longer signs.
    for (const r of after) expect(verifies(r, [oldKey])).toBe(false);
  });
});
