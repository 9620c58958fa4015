import { signSegment, signStandardWebhook } from "@hookpost/receiver";
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
 */
export function signatureHeaders(
  dest: DestinationRecord,
  body: Uint8Array,
  messageId: string,
  now: Date = new Date(),
): Record<string, string> {
  const secrets = signingSecrets(dest, now.getTime());
  const [current, previous] = secrets;
  if (current === undefined) return {};
  const h: Record<string, string> = {};
  if (previous === undefined) {
    h["X-Signature"] = signSegment(body, current);
  } else {
    h["X-Signature"] = signSegment(body, previous);
    h[NEXT_SIGNATURE_HEADER] = signSegment(body, current);
  }
  if (dest.signing === "standard-webhooks") {
    const seconds = Math.floor(now.getTime() / 1000);
    h["webhook-id"] = messageId;
    h["webhook-timestamp"] = String(seconds);
    h["webhook-signature"] = secrets.map((s) => signStandardWebhook(messageId, seconds, body, s)).join(" ");
  }
  return h;
}
