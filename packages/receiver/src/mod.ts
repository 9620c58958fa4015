/**
 * `hookpost/receiver`: check that a webhook request came from Hookpost. Both checks need the raw
 * request body, before JSON parsing. The signing functions are what the dispatcher uses to sign.
 */
export type { RawBody } from "./body.js";
export { signSegment, verifySegmentRequest, verifySignature } from "./segment-signature.js";
export {
  DEFAULT_TOLERANCE_SECONDS,
  type HeaderSource,
  type Secret,
  type StandardWebhookHeaders,
  signStandardWebhook,
  standardWebhookHeaders,
  type VerifiedWebhook,
  type VerifyOptions,
  verifyStandardWebhook,
} from "./standard-webhooks.js";
export {
  generateStandardWebhookKeyPair,
  PUBLIC_KEY_PREFIX,
  SECRET_KEY_PREFIX,
  standardWebhookPublicKey,
} from "./standard-webhooks-ed25519.js";
export {
  generateStandardWebhookSecret,
  SECRET_PREFIX,
  standardWebhookKey,
} from "./standard-webhooks-secret.js";
export { WebhookVerificationError, type WebhookVerificationErrorCode } from "./webhook-verification-error.js";
