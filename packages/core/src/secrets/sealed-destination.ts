import type { DestinationRecord } from "../model/destination.js";
import { type Envelope, openEnvelope, sealEnvelope } from "./envelope.js";
import type { Keyring } from "./keyring.js";

/** What of a destination is secret at rest: its static headers (often API keys) and its secrets. */
interface SecretFields {
  headers: Record<string, string>;
  sharedSecret?: string;
  previousSecret?: string;
}

/**
 * A destination as written to the configuration bucket. With a keyring its secret fields are
 * sealed in `sealed` (one envelope per record) and absent in clear; without one, or as written
 * before encryption existed, they are in clear (still read, and sealed on the next write).
 */
export type StoredDestination = Omit<DestinationRecord, "headers"> & {
  headers?: Record<string, string>;
  sealed?: Envelope;
};

/** Binds an envelope to its record: another destination's sealed secrets do not open here. */
const aadOf = (id: string) => `hookpost_config/destination.${id}`;

/** The record to store: secrets sealed with the keyring's first key, or in clear without a keyring. */
export function sealDestination(record: DestinationRecord, keyring: Keyring | undefined): StoredDestination {
  if (!keyring) return record;
  const { headers, sharedSecret, previousSecret, ...rest } = record;
  const secret: SecretFields = {
    headers,
    ...(sharedSecret !== undefined && { sharedSecret }),
    ...(previousSecret !== undefined && { previousSecret }),
  };
  return { ...rest, sealed: sealEnvelope(keyring, JSON.stringify(secret), aadOf(record.id)) };
}

/**
 * The destination in memory, secrets in clear. Throws SecretsKeyError when they are sealed with a
 * key the keyring lacks, or that does not open them.
 */
export function openDestination(stored: StoredDestination, keyring: Keyring | undefined): DestinationRecord {
  if (stored.sealed === undefined) return { ...stored, headers: stored.headers ?? {} };
  const { sealed, headers: _h, sharedSecret: _s, previousSecret: _p, ...rest } = stored;
  const secret = JSON.parse(
    openEnvelope(keyring, sealed, aadOf(stored.id), `destination "${stored.id}"'s secrets`),
  ) as SecretFields;
  return {
    ...rest,
    headers: secret.headers ?? {},
    ...(secret.sharedSecret !== undefined && { sharedSecret: secret.sharedSecret }),
    ...(secret.previousSecret !== undefined && { previousSecret: secret.previousSecret }),
  };
}

/** The id of the key a stored record (destination or operator webhook) is sealed with; undefined when it is in clear. */
export function sealedWith(stored: { sealed?: Envelope }): string | undefined {
  return stored.sealed?.key;
}
