import { Keyring, newSecretKeyEntry, parseSecretKeys } from "@hookpost/core";
import { expect } from "vitest";

/** A keyring of SECRETS_KEYS entries (`id:key`), the first one primary. */
export const keyring = (...entries: string[]) => new Keyring(parseSecretKeys(entries.join(",")));

/** The key of an `id:key` entry, without its id. */
export const keyText = (entry: string) => entry.slice(entry.indexOf(":") + 1);

/** A new key under the id of `entry`: the wrong key for what `entry` sealed. */
export const wrongKeyFor = (entry: string) => newSecretKeyEntry(entry.slice(0, entry.indexOf(":")));

/** A new key under `id`, and the wrong key for what it seals (wrongKeyFor). */
export function keyAndWrongKey(id: string): [entry: string, wrong: string] {
  const entry = newSecretKeyEntry(id);
  return [entry, wrongKeyFor(entry)];
}

/** Every way a text could show in stored JSON: as is, base64, base64url. */
export const forms = (text: string) => [
  text,
  Buffer.from(text).toString("base64").replace(/=+$/, ""),
  Buffer.from(text).toString("base64url"),
];

/** None of `secrets` shows in `stored` in any of its forms. */
export function expectNowhere(stored: string, secrets: readonly string[]): void {
  for (const secret of secrets) for (const form of forms(secret)) expect(stored).not.toContain(form);
}
