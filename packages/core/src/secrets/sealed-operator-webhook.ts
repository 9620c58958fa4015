import type { OperatorWebhookRecord } from "../model/operator-webhook.js";
import { type Envelope, openEnvelope, sealEnvelope } from "./envelope.js";
import type { Keyring } from "./keyring.js";

/**
 * An operator webhook as written to the configuration bucket: with a keyring its secret is sealed
 * in `sealed` and absent in clear, like a destination's (sealed-destination.ts).
 */
export type StoredOperatorWebhook = Omit<OperatorWebhookRecord, "secret"> & {
  secret?: string;
  sealed?: Envelope;
};

/** Binds an envelope to its record: another record's sealed secret does not open here. */
const aadOf = (id: string) => `hookpost_config/operator_webhook.${id}`;

export function sealOperatorWebhook(
  record: OperatorWebhookRecord,
  keyring: Keyring | undefined,
): StoredOperatorWebhook {
  if (!keyring) return record;
  const { secret, ...rest } = record;
  return { ...rest, sealed: sealEnvelope(keyring, JSON.stringify({ secret }), aadOf(record.id)) };
}

/** The webhook in memory, secret in clear. Throws SecretsKeyError as openDestination does. */
export function openOperatorWebhook(
  stored: StoredOperatorWebhook,
  keyring: Keyring | undefined,
): OperatorWebhookRecord {
  if (stored.sealed === undefined) return { ...stored, secret: stored.secret ?? "" };
  const { sealed, secret: _s, ...rest } = stored;
  const opened = JSON.parse(
    openEnvelope(keyring, sealed, aadOf(stored.id), `operator webhook "${stored.id}"'s secret`),
  ) as { secret?: string };
  return { ...rest, secret: opened.secret ?? "" };
}
