import { createSecretKey, type KeyObject, randomBytes } from "node:crypto";

/** AES-256-GCM keys are 32 bytes. */
export const SECRET_KEY_BYTES = 32;
/** Key ids are stored beside each ciphertext and shown in errors: short and plain. */
const ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** One key of SECRETS_KEYS: its id (stored with every ciphertext it made) and the key. */
export interface SecretKey {
  readonly id: string;
  /** A KeyObject, not a Buffer: printed or serialised by accident, it shows no key bytes. */
  readonly key: KeyObject;
}

/**
 * The keys secrets are encrypted with at rest. The first encrypts; every one decrypts, so a new
 * key can be put first while records sealed with an older one are still read (key rotation).
 */
export class Keyring {
  readonly #keys: readonly SecretKey[];
  readonly #byId: ReadonlyMap<string, SecretKey>;

  constructor(keys: readonly SecretKey[]) {
    if (keys.length === 0) throw new Error("a keyring needs at least one key");
    this.#keys = keys;
    this.#byId = new Map(keys.map((k) => [k.id, k]));
  }

  /** The key new ciphertexts are made with. */
  get primary(): SecretKey {
    return this.#keys[0]!;
  }

  key(id: string): SecretKey | undefined {
    return this.#byId.get(id);
  }

  get ids(): string[] {
    return this.#keys.map((k) => k.id);
  }
}

/** Whether `id` may name a key (it is stored in records and shown in error messages). */
export function isKeyId(id: string): boolean {
  return ID.test(id);
}

/**
 * Parses `id:base64key` entries separated by commas or white space (SECRETS_KEYS, or the file of
 * SECRETS_KEYS_FILE). Throws an Error whose message starts with "must" and never quotes the text
 * (it holds keys).
 */
export function parseSecretKeys(text: string): SecretKey[] {
  const entries = text.split(/[\s,]+/).filter(Boolean);
  if (entries.length === 0) throw new Error("must hold at least one id:base64key entry");
  const keys: SecretKey[] = [];
  entries.forEach((entry, i) => {
    const at = `entry ${i + 1} of ${entries.length}`;
    const colon = entry.indexOf(":");
    const id = entry.slice(0, colon);
    if (colon < 0 || !isKeyId(id)) {
      throw new Error(
        `must be id:base64key entries with ids of letters, digits, '.', '_', '-' (${at} is not)`,
      );
    }
    const bytes = decodeBase64(entry.slice(colon + 1));
    if (bytes?.length !== SECRET_KEY_BYTES) {
      throw new Error(
        `must hold keys of ${SECRET_KEY_BYTES} bytes in base64, e.g. from \`openssl rand -base64 32\` (key "${id}" is not)`,
      );
    }
    if (keys.some((k) => k.id === id)) throw new Error(`must name each key once (key "${id}" is twice)`);
    keys.push({ id, key: createSecretKey(bytes) });
    bytes.fill(0);
  });
  return keys;
}

/** Standard or URL-safe base64, padded or not; undefined when it is neither. */
function decodeBase64(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return undefined;
  return Buffer.from(text.replaceAll("-", "+").replaceAll("_", "/"), "base64");
}

/** A new `id:base64key` entry for SECRETS_KEYS (32 random bytes). */
export function newSecretKeyEntry(id: string): string {
  if (!isKeyId(id)) throw new Error(`not a key id: letters, digits, '.', '_', '-', at most 64`);
  return `${id}:${randomBytes(SECRET_KEY_BYTES).toString("base64")}`;
}
