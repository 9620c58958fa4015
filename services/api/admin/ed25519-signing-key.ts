import { whskProblem } from "@hookpost/contract";
import { type DestinationRecord, signingSecrets } from "@hookpost/core";
import { generateStandardWebhookKeyPair, standardWebhookPublicKey } from "@hookpost/receiver";

/**
 * With standard-webhooks-ed25519 signing a destination always has a `whsk_` key, so that it never
 * sits unable to sign: a write that leaves it without one (created without a key, switched from
 * another signing whose secret is no whsk_ key, or its secret cleared) gets a new key pair. The
 * switch is at once, the previous secret dropped (it could not sign v1a); RotateSecret is the
 * way with an overlap. `given`: this request set the secret itself (it is checked, not replaced).
 * `newKey` returns the same key on every call of one request, so a retried write stores the key
 * the answer shows.
 */
export function ensureSigningKey(record: DestinationRecord, given: boolean, newKey: () => string): void {
  if (record.signing !== "standard-webhooks-ed25519" || given) return;
  if (record.sharedSecret !== undefined && whskProblem(record.sharedSecret) === undefined) return;
  record.sharedSecret = newKey();
  delete record.previousSecret;
  delete record.previousSecretExpiresAt;
}

/** A private key made on first use, then the same one: see ensureSigningKey's `newKey`. */
export function oneNewKey(): () => string {
  let key: string | undefined;
  return () => {
    key ??= generateStandardWebhookKeyPair().secretKey;
    return key;
  };
}

/**
 * The `whpk_` public keys receivers verify an Ed25519-signed destination with: one per key that
 * signs at `now`, the current one first. Empty for other signings. A stored key that cannot sign
 * (written behind the API's back) is left out rather than failing the read: the dispatcher's
 * attempts say why nothing is sent.
 */
export function signingPublicKeys(d: DestinationRecord, now = Date.now()): string[] {
  if (d.signing !== "standard-webhooks-ed25519") return [];
  const out: string[] = [];
  for (const secret of signingSecrets(d, now)) {
    try {
      out.push(standardWebhookPublicKey(secret));
    } catch {
      // Left out (see above).
    }
  }
  return out;
}
