import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { isKeyId, type Keyring } from "./keyring.js";
import { SecretsKeyError } from "./secrets-key-error.js";

/**
 * A text encrypted at rest with AES-256-GCM (node:crypto), naming the key that sealed it so that
 * several keys can be in use at once while keys rotate. `aad` binds it to where it is stored: a
 * ciphertext copied into another record does not open there.
 */
export interface Envelope {
  v: 1;
  /** Id of the SECRETS_KEYS key that sealed it. */
  key: string;
  /** base64 of the 12-byte nonce (random per envelope). */
  iv: string;
  /** base64 of the ciphertext followed by the 16-byte GCM tag. */
  data: string;
}

const ALGORITHM = "aes-256-gcm";
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Seals `plaintext` with the keyring's first key. */
export function sealEnvelope(keyring: Keyring, plaintext: string, aad: string): Envelope {
  const { id, key } = keyring.primary;
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const data = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { v: 1, key: id, iv: iv.toString("base64"), data: data.toString("base64") };
}

/**
 * Opens an envelope with the key it names. `what` says what it holds, for the error: a
 * SecretsKeyError when the keyring is absent, lacks that key, or the key does not open it (another
 * key under the same id, or an altered record).
 */
export function openEnvelope(
  keyring: Keyring | undefined,
  envelope: unknown,
  aad: string,
  what: string,
): string {
  const e = envelope as Partial<Envelope> | null;
  if (
    typeof e !== "object" ||
    e === null ||
    e.v !== 1 ||
    typeof e.key !== "string" ||
    !isKeyId(e.key) ||
    typeof e.iv !== "string" ||
    typeof e.data !== "string"
  ) {
    throw new SecretsKeyError(`${what} are stored in a form this version cannot read (not an envelope v1)`);
  }
  if (!keyring) {
    throw new SecretsKeyError(
      `SECRETS_KEYS is not set, but ${what} are encrypted with key "${e.key}": set SECRETS_KEYS (or SECRETS_KEYS_FILE) with that key`,
    );
  }
  const k = keyring.key(e.key);
  if (!k) {
    throw new SecretsKeyError(
      `SECRETS_KEYS has no key "${e.key}", which encrypted ${what} (it has ${keyring.ids.map((id) => `"${id}"`).join(", ")}): add that key`,
    );
  }
  const iv = Buffer.from(e.iv, "base64");
  const data = Buffer.from(e.data, "base64");
  try {
    if (iv.length !== IV_BYTES || data.length < TAG_BYTES) throw new Error("truncated");
    const decipher = createDecipheriv(ALGORITHM, k.key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(aad, "utf8"));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(data.subarray(0, data.length - TAG_BYTES)),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    throw new SecretsKeyError(
      `SECRETS_KEYS key "${e.key}" cannot decrypt ${what}: it is not the key they were encrypted with, or the stored record was altered`,
    );
  }
}
