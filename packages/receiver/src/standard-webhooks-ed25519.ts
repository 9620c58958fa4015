import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { WebhookVerificationError } from "./webhook-verification-error.js";

/** Prefix of a Standard Webhooks Ed25519 private key (the sender's); the rest is base64. */
export const SECRET_KEY_PREFIX = "whsk_";
/** Prefix of a Standard Webhooks Ed25519 public key (what receivers verify `v1a,` signatures with). */
export const PUBLIC_KEY_PREFIX = "whpk_";

// Node 20 imports raw Ed25519 keys only inside their DER wrappers (RFC 8410): these are the fixed
// bytes before the 32 key bytes of a PKCS#8 private key and of an SPKI public key.
const PKCS8_HEAD = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_HEAD = Buffer.from("302a300506032b6570032100", "hex");
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The base64 after `prefix`, decoded; undefined when it is not that. */
function decoded(text: string, prefix: string): Buffer | undefined {
  if (!text.startsWith(prefix)) return undefined;
  const b64 = text.slice(prefix.length);
  return b64 !== "" && BASE64.test(b64) ? Buffer.from(b64, "base64") : undefined;
}

/**
 * The private key of a `whsk_` key: base64 of the 32-byte Ed25519 private key (RFC 8032), or of
 * the 64 bytes private key then public key that libsodium and some senders store (the public half
 * must belong to the private one). Messages never quote the key: they may reach logs.
 */
export function ed25519PrivateKey(secretKey: string): KeyObject {
  const bytes = decoded(secretKey, SECRET_KEY_PREFIX);
  if (bytes === undefined || (bytes.length !== 32 && bytes.length !== 64)) {
    throw new WebhookVerificationError(
      "invalid_secret",
      "an Ed25519 secret key is whsk_ followed by the base64 of its 32 bytes (or 64: private then public)",
    );
  }
  const key = createPrivateKey({
    key: Buffer.concat([PKCS8_HEAD, bytes.subarray(0, 32)]),
    format: "der",
    type: "pkcs8",
  });
  if (bytes.length === 64 && !rawPublicKey(key).equals(bytes.subarray(32))) {
    throw new WebhookVerificationError(
      "invalid_secret",
      "the whsk_ key's last 32 bytes are not the public key of its first 32",
    );
  }
  return key;
}

/** The public key of a `whpk_` key: base64 of the 32-byte Ed25519 public key. */
export function ed25519PublicKey(publicKey: string): KeyObject {
  if (publicKey.startsWith(SECRET_KEY_PREFIX)) {
    throw new WebhookVerificationError(
      "invalid_secret",
      "a whsk_ key is the sender's private key: verify with its whpk_ public key, and keep the private key secret",
    );
  }
  const bytes = decoded(publicKey, PUBLIC_KEY_PREFIX);
  if (bytes === undefined || bytes.length !== 32) {
    throw new WebhookVerificationError(
      "invalid_secret",
      "an Ed25519 public key is whpk_ followed by the base64 of its 32 bytes",
    );
  }
  return createPublicKey({ key: Buffer.concat([SPKI_HEAD, bytes]), format: "der", type: "spki" });
}

/** The `whpk_` public key that verifies what the `whsk_` key signs. */
export function standardWebhookPublicKey(secretKey: string): string {
  return `${PUBLIC_KEY_PREFIX}${rawPublicKey(ed25519PrivateKey(secretKey)).toString("base64")}`;
}

/**
 * A new Ed25519 key pair in the Standard Webhooks form: the `whsk_` private key (32 bytes, the
 * RFC 8032 form) for the sender, the `whpk_` public key for receivers.
 */
export function generateStandardWebhookKeyPair(): { secretKey: string; publicKey: string } {
  const { privateKey } = generateKeyPairSync("ed25519");
  const der = privateKey.export({ format: "der", type: "pkcs8" });
  const secretKey = `${SECRET_KEY_PREFIX}${der.subarray(PKCS8_HEAD.length).toString("base64")}`;
  return { secretKey, publicKey: `${PUBLIC_KEY_PREFIX}${rawPublicKey(privateKey).toString("base64")}` };
}

function rawPublicKey(key: KeyObject): Buffer {
  return createPublicKey(key).export({ format: "der", type: "spki" }).subarray(SPKI_HEAD.length);
}
