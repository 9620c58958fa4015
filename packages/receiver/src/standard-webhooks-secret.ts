import { randomBytes } from "node:crypto";
import { WebhookVerificationError } from "./webhook-verification-error.js";

/** Prefix of a Standard Webhooks secret; the rest is the key in base64. */
export const SECRET_PREFIX = "whsec_";

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * The HMAC key of a Standard Webhooks secret: `whsec_` + base64 decodes to its bytes (the prefix is
 * optional, as in the reference libraries); key bytes may be given as they are.
 */
export function standardWebhookKey(secret: string | Uint8Array): Uint8Array {
  if (typeof secret !== "string") {
    if (secret.length === 0) throw new WebhookVerificationError("invalid_secret", "the secret is empty");
    return secret;
  }
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (!BASE64.test(encoded) || encoded.replace(/=+$/, "").length % 4 === 1) {
    throw new WebhookVerificationError("invalid_secret", "the secret must be whsec_ followed by base64");
  }
  return Buffer.from(encoded, "base64");
}

/** A new random secret in the Standard Webhooks form (32 key bytes; the spec asks for 24 to 64). */
export function generateStandardWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`;
}
