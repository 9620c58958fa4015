import { readFileSync } from "node:fs";
import type { Settings } from "../config/schema.js";
import { Keyring, parseSecretKeys, type SecretKey } from "../secrets/keyring.js";
import { ConfigError } from "./read-env.js";

/** Logged once at start without keys: storing secrets in plain text should be a choice. */
export const PLAIN_SECRETS_WARNING =
  "SECRETS_KEYS is not set: destinations' shared secrets and header values are stored in plain text";

/**
 * The keys that encrypt secrets at rest, from SECRETS_KEYS or the file SECRETS_KEYS_FILE names;
 * undefined when neither is set (secrets are then stored in plain text). Throws ConfigError.
 */
export function keyringFrom(s: Pick<Settings, "SECRETS_KEYS" | "SECRETS_KEYS_FILE">): Keyring | undefined {
  if (s.SECRETS_KEYS !== undefined && s.SECRETS_KEYS_FILE !== undefined) {
    throw new ConfigError("SECRETS_KEYS and SECRETS_KEYS_FILE are both set: set one of them");
  }
  if (s.SECRETS_KEYS !== undefined) return new Keyring(s.SECRETS_KEYS);
  if (s.SECRETS_KEYS_FILE === undefined) return undefined;
  const file = s.SECRETS_KEYS_FILE;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(
      `SECRETS_KEYS_FILE: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  let keys: SecretKey[];
  try {
    keys = parseSecretKeys(text);
  } catch (err) {
    // The message never quotes the file's text (it holds keys).
    throw new ConfigError(`SECRETS_KEYS_FILE ${file} ${(err as Error).message}`);
  }
  return new Keyring(keys);
}
