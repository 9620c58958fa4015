import { randomBytes } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@hookpost/contract";
import {
  type Destination,
  type DestinationSchema,
  Signing,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { ConfigStore } from "@hookpost/core";
import {
  generateStandardWebhookKeyPair,
  generateStandardWebhookSecret,
  standardWebhookPublicKey,
} from "@hookpost/receiver";
import { beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { failure, fields, useHarness } from "./harness.js";

// SIGNING_STANDARD_WEBHOOKS_ED25519 through the admin API (real ingest and nats-server): the
// server keeps the whsk_ private key (given, or generated), never returns it, and shows the
// whpk_ public keys that sign now. Deliveries: test/lifecycle/ed25519-signing.test.ts.

const h = useHarness();
const store = useFixture(() => ConfigStore.open(h.nc), "config store");
let sourceId: string;

beforeAll(async () => {
  sourceId = (await h.admin.createSource({ name: "web" })).source!.id;
});

const ED25519 = Signing.STANDARD_WEBHOOKS_ED25519;
const WHPK = /^whpk_[A-Za-z0-9+/]{43}=$/;

async function create(over: MessageInitShape<typeof DestinationSchema> = {}): Promise<Destination> {
  const res = await h.admin.createDestination({
    destination: {
      name: "ed25519 hook",
      sourceIds: [sourceId],
      urls: ["https://hooks.example.com/in"],
      signing: ED25519,
      ...over,
    },
  });
  return res.destination!;
}

/** The private key the configuration store holds for `id` once it has `check`. */
async function storedKey(id: string, check: (secret: string | undefined) => boolean = () => true) {
  const d = await until(
    () => {
      const r = store.destination(id);
      return r && check(r.sharedSecret) ? r : undefined;
    },
    { message: `destination ${id} in the store` },
  );
  return d.sharedSecret!;
}

/** Answers and audit records, serialised: no private key, nor the base64 of `key`, in any of them. */
function expectNoPrivateKey(key: string, ...answers: unknown[]): void {
  const text = JSON.stringify(answers, (_k, v) => (typeof v === "bigint" ? String(v) : v));
  expect(text).not.toContain("whsk_");
  expect(text).not.toContain(key.slice("whsk_".length));
}

describe("creating an Ed25519-signed destination", () => {
  it("without a key: the server generates one, keeps it, and shows only its public key", async () => {
    const d = await create();
    expect(d.signing).toBe(ED25519);
    expect(d.sharedSecretSet).toBe(true);
    expect(d.sharedSecret).toBe("");
    expect(d.signingPublicKeys).toHaveLength(1);
    expect(d.signingPublicKeys[0]).toMatch(WHPK);
    const key = await storedKey(d.id);
    expect(standardWebhookPublicKey(key)).toBe(d.signingPublicKeys[0]);
    const got = (await h.admin.getDestination({ id: d.id })).destination!;
    expect(got.signingPublicKeys).toEqual(d.signingPublicKeys);
    const listed = (await h.admin.listDestinations({})).destinations;
    const audit = (await h.admin.listAuditRecords({ resourceId: d.id })).records;
    expect(audit.length).toBeGreaterThan(0);
    expectNoPrivateKey(key, d, got, listed, audit);
  });

  it("with a key: given in either form, it is used", async () => {
    const { secretKey, publicKey } = generateStandardWebhookKeyPair();
    expect((await create({ sharedSecret: secretKey })).signingPublicKeys).toEqual([publicKey]);
    // The 64-byte form (private then public key, as libsodium stores it).
    const raw = Buffer.from(secretKey.slice("whsk_".length), "base64");
    const pub = Buffer.from(publicKey.slice("whpk_".length), "base64");
    const long = `whsk_${Buffer.concat([raw, pub]).toString("base64")}`;
    expect((await create({ sharedSecret: long })).signingPublicKeys).toEqual([publicKey]);
  });

  it("a key that is no whsk_ Ed25519 key is refused with a clear error that does not quote it", async () => {
    const seed = randomBytes(32);
    const bad = [
      generateStandardWebhookSecret(),
      "plain-secret",
      "whsk_",
      "whsk_not base64!",
      `whsk_${randomBytes(31).toString("base64")}`,
      `whsk_${Buffer.concat([seed, randomBytes(32)]).toString("base64")}`,
    ];
    const before = (await h.admin.listDestinations({})).destinations.length;
    for (const secret of bad) {
      const err = await failure(create({ sharedSecret: secret }));
      expect(err.code, secret).toBe(Code.INVALID_ARGUMENT);
      expect(fields(err)).toEqual(["destination.shared_secret"]);
      expect(err.message).toMatch(/the shared secret is not an Ed25519 secret key \(whsk_\): /);
      const quoted = secret.replace(/^wh(sec|sk)_/, "");
      if (quoted.length > 4) expect(err.message).not.toContain(quoted);
    }
    expect((await h.admin.listDestinations({})).destinations).toHaveLength(before);
  });
});

describe("updating an Ed25519-signed destination", () => {
  it("keeps its key through other changes, and an empty secret with an empty mask", async () => {
    const d = await create();
    const renamed = await h.admin.updateDestination({
      destination: { id: d.id, name: "renamed" },
      updateMask: { paths: ["name"] },
    });
    expect(renamed.destination!.signingPublicKeys).toEqual(d.signingPublicKeys);
    const replaced = await h.admin.updateDestination({
      destination: { ...d, name: "replaced", sharedSecret: "" },
    });
    expect(replaced.destination!.signingPublicKeys).toEqual(d.signingPublicKeys);
  });

  it("switching to it from another signing generates a key; clearing the secret replaces it at once", async () => {
    const seg = await create({ signing: Signing.SEGMENT, sharedSecret: "segment-secret" });
    expect(seg.signingPublicKeys).toEqual([]);
    const switched = await h.admin.updateDestination({
      destination: { id: seg.id, signing: ED25519 },
      updateMask: { paths: ["signing"] },
    });
    const [first] = switched.destination!.signingPublicKeys;
    expect(first).toMatch(WHPK);
    expect(switched.destination!.sharedSecretSet).toBe(true);
    const cleared = await h.admin.updateDestination({
      destination: { id: seg.id },
      updateMask: { paths: ["shared_secret"] },
    });
    expect(cleared.destination!.signingPublicKeys).toHaveLength(1);
    expect(cleared.destination!.signingPublicKeys[0]).not.toBe(first);
    expect(cleared.destination!.previousSecretExpireTime).toBeUndefined();
    expect(await storedKey(seg.id, (s) => s !== undefined && standardWebhookPublicKey(s) !== first)).toMatch(
      /^whsk_/,
    );
    // And back: HMAC signings take no Ed25519 key.
    const back = await failure(
      h.admin.updateDestination({
        destination: { id: seg.id, signing: Signing.STANDARD_WEBHOOKS },
        updateMask: { paths: ["signing"] },
      }),
    );
    expect(back.message).toContain("the current shared secret is not a Standard Webhooks secret");
    const hmac = await h.admin.updateDestination({
      destination: {
        id: seg.id,
        signing: Signing.STANDARD_WEBHOOKS,
        sharedSecret: generateStandardWebhookSecret(),
      },
      updateMask: { paths: ["signing", "shared_secret"] },
    });
    expect(hmac.destination!.signingPublicKeys).toEqual([]);
  });

  it("a given key is checked, not replaced; signing_public_keys cannot be written", async () => {
    const d = await create();
    const err = await failure(
      h.admin.updateDestination({
        destination: { id: d.id, sharedSecret: generateStandardWebhookSecret() },
        updateMask: { paths: ["shared_secret"] },
      }),
    );
    expect(fields(err)).toEqual(["destination.shared_secret"]);
    const readOnly = await failure(
      h.admin.updateDestination({
        destination: { id: d.id, signingPublicKeys: ["whpk_x"] },
        updateMask: { paths: ["signing_public_keys"] },
      }),
    );
    expect(readOnly.message).toContain('"signing_public_keys" cannot be changed');
    expect((await h.admin.getDestination({ id: d.id })).destination!.signingPublicKeys).toEqual(
      d.signingPublicKeys,
    );
  });

  it("cannot switch while a rotated-out secret that is no whsk_ key still signs", async () => {
    const seg = await create({ signing: Signing.SEGMENT, sharedSecret: "old-segment-secret" });
    const { secretKey } = generateStandardWebhookKeyPair();
    await h.admin.rotateSecret({
      destinationId: seg.id,
      newSecret: secretKey,
      previousValidFor: durationFromMs(3600_000),
    });
    const err = await failure(
      h.admin.updateDestination({
        destination: { id: seg.id, signing: ED25519 },
        updateMask: { paths: ["signing"] },
      }),
    );
    expect(fields(err)).toEqual(["destination.signing"]);
    expect(err.message).toMatch(/previous secret .* is not an Ed25519 secret key/);
    expect(err.message).not.toContain("old-segment-secret");
  });
});

describe("RotateSecret with Ed25519 signing", () => {
  it("makes a new key pair; both public keys are shown during the overlap; no private key is answered", async () => {
    const d = await create();
    const [old] = d.signingPublicKeys;
    const r = await h.admin.rotateSecret({ destinationId: d.id, previousValidFor: durationFromMs(3600_000) });
    expect(r.secret).toBe("");
    expect(r.previousSecretExpireTime).toBeDefined();
    const keys = r.destination!.signingPublicKeys;
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(WHPK);
    expect(keys[0]).not.toBe(old);
    expect(keys[1]).toBe(old);
    expect((await h.admin.getDestination({ id: d.id })).destination!.signingPublicKeys).toEqual(keys);
    const audit = (await h.admin.listAuditRecords({ resourceId: d.id })).records;
    expectNoPrivateKey(
      await storedKey(d.id, (s) => s !== undefined && standardWebhookPublicKey(s) === keys[0]),
      r,
      audit,
    );

    // A given key is used; without an overlap only it signs.
    const given = generateStandardWebhookKeyPair();
    const now = await h.admin.rotateSecret({
      destinationId: d.id,
      newSecret: given.secretKey,
      previousValidFor: durationFromMs(0),
    });
    expect(now.secret).toBe("");
    expect(now.destination!.signingPublicKeys).toEqual([given.publicKey]);
    const bad = await failure(h.admin.rotateSecret({ destinationId: d.id, newSecret: "whsk_short" }));
    expect(fields(bad)).toEqual(["new_secret"]);
    expect(bad.message).toContain("not an Ed25519 secret key");
  });
});
