import { createPrivateKey, createPublicKey } from "node:crypto";
import { STANDARD_BASE64 } from "./text.js";

/** Prefix of a Standard Webhooks Ed25519 private key. */
const WHSK_PREFIX = "whsk_";

/**
 * Why `secret` is not a Standard Webhooks Ed25519 private key, or undefined when it is one:
 * `whsk_` + base64 of the 32-byte private key (RFC 8032), or of 64 bytes, private then public key
 * (libsodium's form), whose halves must belong together. The receiver package signs with the same
 * two forms. Never quotes the key.
 */
export function whskProblem(secret: string): string | undefined {
  if (!secret.startsWith(WHSK_PREFIX)) return "it must start with whsk_";
  const b64 = secret.slice(WHSK_PREFIX.length);
  if (b64 === "" || !STANDARD_BASE64.test(b64)) {
    return "after whsk_ comes standard base64 (A-Z a-z 0-9 + /, = padding)";
  }
  const bytes = Buffer.from(b64, "base64");
  if (bytes.length !== 32 && bytes.length !== 64) {
    return `it decodes to ${bytes.length} bytes; an Ed25519 private key is 32 (or 64: private then public key)`;
  }
  if (bytes.length === 64 && !halvesMatch(bytes)) {
    return "its last 32 bytes are not the public key of its first 32";
  }
  return undefined;
}

/** The public key derived from the first 32 bytes is the last 32. */
function halvesMatch(bytes: Buffer): boolean {
  const x = bytes.subarray(32).toString("base64url");
  try {
    // Node derives the public key from `d`; `x` is required by the JWK form but not trusted.
    const key = createPrivateKey({
      format: "jwk",
      key: { kty: "OKP", crv: "Ed25519", d: bytes.subarray(0, 32).toString("base64url"), x },
    });
    return createPublicKey(key).export({ format: "jwk" }).x === x;
  } catch {
    return false;
  }
}
