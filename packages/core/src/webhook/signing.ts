import { SECRET_KEY_PREFIX, signSegment, signStandardWebhook } from "@hookpost/receiver";
import { type DestinationRecord, signingSecrets } from "../model/destination.js";

/** Carries the new secret's Segment signature while the previous secret still signs X-Signature. */
export const NEXT_SIGNATURE_HEADER = "X-Signature-Next";

/**
 * The signature headers of one request, with every secret that signs now (see signingSecrets).
 *
 * Segment: `X-Signature` is signed with the OLDEST secret still valid, so a receiver that has not
 * switched yet keeps verifying during the whole overlap; `X-Signature-Next` carries the new
 * secret's signature for receivers that already switched. When the overlap ends, X-Signature
 * carries the new secret and X-Signature-Next is gone.
 *
 * Standard Webhooks: `webhook-signature` lists one `v1,` signature per secret, space-separated,
 * as the spec defines; any conforming verifier accepts the request with either secret.
 *
 * Standard Webhooks Ed25519: the same headers with one `v1a,` signature per `whsk_` key (the
 * receiver package signs by the key's prefix), and no X-Signature: there is no shared secret to
 * key an HMAC with (receivers hold only the public key).
 */
export function signatureHeaders(
  dest: DestinationRecord,
  body: Uint8Array,
  messageId: string,
  now: Date = new Date(),
): Record<string, string> {
  const secrets = signingSecrets(dest, now.getTime());
  if (secrets.length === 0) return {};
  const ed25519 = dest.signing === "standard-webhooks-ed25519";
  // The key's prefix picks the scheme: a secret that is no whsk_ key (stored behind the API's
  // back) fails the request instead of going out as an HMAC the receiver does not expect.
  if (ed25519 && !secrets.every((s) => s.startsWith(SECRET_KEY_PREFIX))) {
    throw new Error(
      "standard-webhooks-ed25519 signing needs whsk_ keys, and a secret of this destination is not one",
    );
  }
  const h: Record<string, string> = ed25519 ? {} : segmentHeaders(body, secrets);
  if (dest.signing !== "segment") {
    const seconds = Math.floor(now.getTime() / 1000);
    h["webhook-id"] = messageId;
    h["webhook-timestamp"] = String(seconds);
    h["webhook-signature"] = secrets.map((s) => signStandardWebhook(messageId, seconds, body, s)).join(" ");
  }
  return h;
}

/** X-Signature, and X-Signature-Next during an overlap (see signatureHeaders). */
function segmentHeaders(body: Uint8Array, [current, previous]: readonly string[]): Record<string, string> {
  if (previous === undefined) return { "X-Signature": signSegment(body, current!) };
  return { "X-Signature": signSegment(body, previous), [NEXT_SIGNATURE_HEADER]: signSegment(body, current!) };
}
