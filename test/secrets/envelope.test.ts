import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ConfigError,
  type DestinationRecord,
  type Envelope,
  Keyring,
  keyringFrom,
  loadSettings,
  newSecretKeyEntry,
  openDestination,
  openEnvelope,
  parseSecretKeys,
  SecretsKeyError,
  sealDestination,
  sealEnvelope,
} from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { expectNowhere, keyAndWrongKey, keyring, keyText } from "./keyring.js";

// The crypto envelope of secrets at rest (packages/core/src/secrets/): AES-256-GCM, several keys
// at once, each ciphertext naming its key; nothing here touches NATS.

const [entryA, entryWrongA] = keyAndWrongKey("a");
const entryB = newSecretKeyEntry("b");

const destination = (over: Partial<DestinationRecord> = {}): DestinationRecord => ({
  id: "crm",
  name: "CRM",
  sourceIds: ["web"],
  urls: ["https://crm.example.com/hook"],
  headers: { "X-Api-Key": "header-value-123" },
  sharedSecret: "current-secret-456",
  previousSecret: "previous-secret-789",
  previousSecretExpiresAt: "2030-01-01T00:00:00.000Z",
  signing: "segment",
  enabled: true,
  createdAt: "2026-01-01T00:00:00.000Z",
  updatedAt: "2026-01-01T00:00:00.000Z",
  ...over,
});

describe("the envelope", () => {
  it("seals with the first key and opens with the key it names, whichever is first now", () => {
    const sealed = sealEnvelope(keyring(entryA, entryB), "hello", "aad");
    expect(sealed).toMatchObject({ v: 1, key: "a" });
    expect(JSON.stringify(sealed)).not.toContain("hello");
    expect(openEnvelope(keyring(entryA), sealed, "aad", "x")).toBe("hello");
    expect(openEnvelope(keyring(entryB, entryA), sealed, "aad", "x")).toBe("hello");
    // A new nonce each time: the same text never seals alike.
    expect(sealEnvelope(keyring(entryA), "hello", "aad").data).not.toBe(sealed.data);
  });

  it("refuses a tampered ciphertext, nonce, tag or key id, and another record's envelope", () => {
    const ring = keyring(entryA, entryB);
    const sealed = sealEnvelope(ring, "hello", "destination.crm");
    const flip = (b64: string, at: number) => {
      const bytes = Buffer.from(b64, "base64");
      bytes[at]! ^= 1;
      return bytes.toString("base64");
    };
    const tampered: Envelope[] = [
      { ...sealed, data: flip(sealed.data, 0) },
      { ...sealed, data: flip(sealed.data, Buffer.from(sealed.data, "base64").length - 1) },
      { ...sealed, iv: flip(sealed.iv, 3) },
      { ...sealed, key: "b" },
      { ...sealed, data: Buffer.from(sealed.data, "base64").subarray(0, 10).toString("base64") },
    ];
    for (const e of tampered) {
      expect(() => openEnvelope(ring, e, "destination.crm", "the test's text")).toThrow(SecretsKeyError);
    }
    expect(() => openEnvelope(ring, sealed, "destination.other", "x")).toThrow(SecretsKeyError);
    expect(() => openEnvelope(ring, { ...sealed, v: 2 }, "destination.crm", "x")).toThrow(/envelope v1/);
    expect(() => openEnvelope(ring, "not an envelope", "destination.crm", "x")).toThrow(SecretsKeyError);
  });

  it("says which key it could not use, never a key or the text", () => {
    const sealed = sealEnvelope(keyring(entryA), "hello", "aad");
    const message = (ring: Keyring | undefined) => {
      try {
        openEnvelope(ring, sealed, "aad", `destination "crm"'s secrets`);
      } catch (err) {
        expect(err).toBeInstanceOf(SecretsKeyError);
        expect(err).toBeInstanceOf(ConfigError); // so a service stops with this one line
        return (err as Error).message;
      }
      throw new Error("opened");
    };
    const wrong = message(keyring(entryWrongA));
    const missing = message(keyring(entryB));
    const none = message(undefined);
    expect(wrong).toBe(
      `SECRETS_KEYS key "a" cannot decrypt destination "crm"'s secrets: it is not the key they were encrypted with, or the stored record was altered`,
    );
    expect(missing).toBe(
      `SECRETS_KEYS has no key "a", which encrypted destination "crm"'s secrets (it has "b"): add that key`,
    );
    expect(none).toMatch(
      /^SECRETS_KEYS is not set, but destination "crm"'s secrets are encrypted with key "a"/,
    );
    for (const m of [wrong, missing, none]) {
      for (const secret of [keyText(entryA), keyText(entryB), keyText(entryWrongA), "hello"]) {
        expect(m).not.toContain(secret);
      }
    }
  });
});

describe("a destination at rest", () => {
  it("keeps its secrets and header values only sealed, and opens to the same record", () => {
    const d = destination();
    const stored = sealDestination(d, keyring(entryA));
    const json = JSON.stringify(stored);
    expectNowhere(json, ["header-value-123", "current-secret-456", "previous-secret-789"]);
    expect(stored).not.toHaveProperty("sharedSecret");
    expect(stored).not.toHaveProperty("headers");
    expect(stored.sealed?.key).toBe("a");
    // What is not secret stays readable (routing, the console's listings).
    expect(stored).toMatchObject({ id: "crm", urls: d.urls, sourceIds: d.sourceIds, enabled: true });
    expect(openDestination(JSON.parse(json), keyring(entryB, entryA))).toEqual(d);
  });

  it("without secrets or headers, opens without them", () => {
    const d = destination({ headers: {} });
    delete d.sharedSecret;
    delete d.previousSecret;
    delete d.previousSecretExpiresAt;
    expect(
      openDestination(JSON.parse(JSON.stringify(sealDestination(d, keyring(entryA)))), keyring(entryA)),
    ).toEqual(d);
  });

  it("is read as written before encryption existed (plain), and stored plain without a keyring", () => {
    const d = destination();
    expect(sealDestination(d, undefined)).toEqual(d);
    expect(openDestination(JSON.parse(JSON.stringify(d)), keyring(entryA))).toEqual(d);
    expect(openDestination(JSON.parse(JSON.stringify(d)), undefined)).toEqual(d);
  });

  it("does not open under another destination's id (sealed secrets copied across records)", () => {
    const stored = sealDestination(destination(), keyring(entryA));
    expect(() => openDestination({ ...stored, id: "other" }, keyring(entryA))).toThrow(
      /cannot decrypt destination "other"'s secrets/,
    );
  });
});

describe("SECRETS_KEYS", () => {
  it("reads id:base64key entries, standard or URL-safe base64, separated by commas or white space", () => {
    const urlSafe = `c:${Buffer.from(keyText(entryA), "base64").toString("base64url")}`;
    const keys = parseSecretKeys(` ${entryB},${entryA}\n${urlSafe}\n`);
    expect(keys.map((k) => k.id)).toEqual(["b", "a", "c"]);
    expect(new Keyring(keys).primary.id).toBe("b");
    // Keys are KeyObjects: printed by accident, they show no key bytes.
    expect(JSON.stringify(keys)).not.toContain(keyText(entryA));
  });

  it("refuses bad entries with one line that never quotes a key", () => {
    const bad = (value: string, message: RegExp) => {
      let thrown: unknown;
      try {
        loadSettings("api", { SECRETS_KEYS: value });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toMatch(message);
      expect((thrown as Error).message).not.toContain(keyText(entryA));
      expect((thrown as Error).message).not.toContain("got");
    };
    bad(keyText(entryA), /^SECRETS_KEYS must be id:base64key entries .*\(entry 1 of 1 is not\)$/);
    bad(
      `a:${keyText(entryA).slice(0, 20)}`,
      /^SECRETS_KEYS must hold keys of 32 bytes in base64.*\(key "a" is not\)$/,
    );
    bad(`${entryA},${entryA}`, /^SECRETS_KEYS must name each key once \(key "a" is twice\)$/);
    bad(`x y:${keyText(entryA)}`, /entry 1 of 2 is not/);
    expect(loadSettings("api", { SECRETS_KEYS: entryA }).SECRETS_KEYS?.[0]?.id).toBe("a");
  });

  it("or SECRETS_KEYS_FILE, one of the two", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hookpost-keys-"));
    try {
      const file = join(dir, "keys");
      await writeFile(file, `${entryB}\n${entryA}\n`, { mode: 0o600 });
      expect(keyringFrom(loadSettings("dispatcher", { SECRETS_KEYS_FILE: file }))?.ids).toEqual(["b", "a"]);
      expect(keyringFrom(loadSettings("dispatcher", {}))).toBeUndefined();
      expect(() =>
        keyringFrom(loadSettings("api", { SECRETS_KEYS_FILE: file, SECRETS_KEYS: entryA })),
      ).toThrow("SECRETS_KEYS and SECRETS_KEYS_FILE are both set: set one of them");
      expect(() => keyringFrom(loadSettings("api", { SECRETS_KEYS_FILE: join(dir, "none") }))).toThrow(
        /^SECRETS_KEYS_FILE: cannot read .*none: ENOENT$/,
      );
      await writeFile(file, keyText(entryA));
      expect(() => keyringFrom(loadSettings("api", { SECRETS_KEYS_FILE: file }))).toThrow(
        /^SECRETS_KEYS_FILE .* must be id:base64key entries/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
