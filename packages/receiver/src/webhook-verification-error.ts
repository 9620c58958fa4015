/**
 * Why a Standard Webhooks request was refused:
 * - `missing_headers`: `webhook-id`, `webhook-timestamp` or `webhook-signature` is absent.
 * - `invalid_timestamp`: `webhook-timestamp` is not a whole number of seconds.
 * - `timestamp_too_old` / `timestamp_too_new`: outside the tolerance (replay protection).
 * - `invalid_signature`: no `v1` (HMAC) or `v1a` (Ed25519) signature matches a key given.
 * - `invalid_secret`: a key is neither `whsec_` + base64 (or raw key bytes) nor a `whpk_` public
 *   key (a `whsk_` private key is refused: receivers verify with the public key).
 */
export type WebhookVerificationErrorCode =
  | "missing_headers"
  | "invalid_timestamp"
  | "timestamp_too_old"
  | "timestamp_too_new"
  | "invalid_signature"
  | "invalid_secret";

export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
  readonly code: WebhookVerificationErrorCode;

  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}
