import { Keyring, parseSecretKeys } from "@hookpost/core";

/** A keyring of SECRETS_KEYS entries (`id:key`), the first one primary. */
export const keyring = (...entries: string[]) => new Keyring(parseSecretKeys(entries.join(",")));

/** The key of an `id:key` entry, without its id. */
export const keyText = (entry: string) => entry.slice(entry.indexOf(":") + 1);
