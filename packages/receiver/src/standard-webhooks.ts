import { createHmac, type KeyObject, sign, timingSafeEqual, verify } from "node:crypto";
import { bodyBytes, type RawBody } from "./body.js";
import {
  ed25519PrivateKey,
  ed25519PublicKey,
  PUBLIC_KEY_PREFIX,
  SECRET_KEY_PREFIX,
} from "./standard-webhooks-ed25519.js";
import { standardWebhookKey } from "./standard-webhooks-secret.js";
import { WebhookVerificationError } from "./webhook-verification-error.js";

/** The Standard Webhooks default: requests more than 5 minutes off the receiver's clock are refused. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * A `whsec_` secret or its key bytes (HMAC, `v1,`); a `whsk_` private key to sign or a `whpk_`
 * public key to verify (Ed25519, `v1a,`).
 */
export type Secret = string | Uint8Array;

/** Request headers as Node (`req.headers`), fetch (`Headers`) or a plain object give them. */
export type HeaderSource =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

export type StandardWebhookHeaders = {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
};

/**
 * The signature of one message, over "id.timestamp.body": `v1,<base64 HMAC-SHA256>` with a
 * `whsec_` secret (or key bytes), `v1a,<base64 Ed25519 signature>` with a `whsk_` private key:
 * the key's prefix picks the scheme, as the spec intends its prefixes to.
 */
export function signStandardWebhook(
  id: string,
  timestamp: Date | number,
  body: RawBody,
  secret: Secret,
): string {
  const seconds =
    typeof timestamp === "number" ? Math.floor(timestamp) : Math.floor(timestamp.getTime() / 1000);
  if (typeof secret === "string" && secret.startsWith(SECRET_KEY_PREFIX)) {
    return `v1a,${sign(null, signedContent(id, seconds, body), ed25519PrivateKey(secret)).toString("base64")}`;
  }
  const mac = createHmac("sha256", standardWebhookKey(secret))
    .update(`${id}.${seconds}.`, "utf8")
    .update(bodyBytes(body))
    .digest("base64");
  return `v1,${mac}`;
}

/** What both schemes sign: `{id}.{timestamp}.{body}`, the body as its bytes. */
function signedContent(id: string, seconds: number, body: RawBody): Buffer {
  return Buffer.concat([Buffer.from(`${id}.${seconds}.`, "utf8"), bodyBytes(body)]);
}

/** The three headers a sender adds; `timestamp` defaults to now. */
export function standardWebhookHeaders(
  id: string,
  body: RawBody,
  secret: Secret,
  timestamp: Date = new Date(),
): StandardWebhookHeaders {
  const seconds = Math.floor(timestamp.getTime() / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(seconds),
    "webhook-signature": signStandardWebhook(id, seconds, body, secret),
  };
}

export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way. Default 300 s. */
  toleranceSeconds?: number;
  /** The receiver's clock (tests). */
  now?: Date;
}

export interface VerifiedWebhook {
  /** `webhook-id`: the message id; the same on every retry, so use it to drop duplicates. */
  id: string;
  timestamp: Date;
}

/**
 * Verifies a Standard Webhooks request on its raw body: the timestamp must be within the tolerance
 * (replay protection) and one of the space-separated signatures must match one of the keys:
 * `v1,` (HMAC, compared in constant time) for `whsec_` secrets and key bytes, `v1a,` (Ed25519) for
 * `whpk_` public keys; the two may be mixed in one list. Throws a WebhookVerificationError naming
 * what failed.
 */
export function verifyStandardWebhook(
  rawBody: RawBody,
  headers: HeaderSource,
  secret: Secret | readonly Secret[],
  options: VerifyOptions = {},
): VerifiedWebhook {
  // Several secrets: while rotating, the receiver accepts the old one and the new one.
  const given = Array.isArray(secret) ? (secret as readonly Secret[]) : [secret as Secret];
  if (given.length === 0) throw new WebhookVerificationError("invalid_secret", "no secret given");
  const keys: Uint8Array[] = [];
  const publicKeys: KeyObject[] = [];
  for (const s of given) {
    // A whsk_ key is refused there, with a message saying to use its public key.
    if (typeof s === "string" && isEd25519Key(s)) publicKeys.push(ed25519PublicKey(s));
    else keys.push(standardWebhookKey(s));
  }
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !ts || !signatures) {
    throw new WebhookVerificationError(
      "missing_headers",
      "webhook-id, webhook-timestamp and webhook-signature are required",
    );
  }
  if (!/^\d{1,15}$/.test(ts.trim())) {
    throw new WebhookVerificationError(
      "invalid_timestamp",
      "webhook-timestamp must be whole seconds since the epoch",
    );
  }
  const seconds = Number(ts.trim());
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (now - seconds > tolerance) {
    throw new WebhookVerificationError(
      "timestamp_too_old",
      `webhook-timestamp is more than ${tolerance} s old`,
    );
  }
  if (seconds - now > tolerance) {
    throw new WebhookVerificationError(
      "timestamp_too_new",
      `webhook-timestamp is more than ${tolerance} s ahead`,
    );
  }
  const expected = keys.map((key) =>
    Buffer.from(signStandardWebhook(id, seconds, rawBody, key).slice(3), "utf8"),
  );
  const content = publicKeys.length > 0 ? signedContent(id, seconds, rawBody) : undefined;
  const verified = { id, timestamp: new Date(seconds * 1000) };
  for (const entry of signatures.split(" ")) {
    const [version, signature] = entry.split(",", 2);
    if (!signature) continue;
    // Versions without a key given (and unknown ones) are for other verifiers: skipped, as the spec says.
    if (version === "v1") {
      const mac = Buffer.from(signature, "utf8");
      if (expected.some((e) => mac.length === e.length && timingSafeEqual(mac, e))) return verified;
    } else if (version === "v1a" && content !== undefined) {
      const sig = Buffer.from(signature, "base64");
      if (sig.length === 64 && publicKeys.some((k) => verify(null, content, k, sig))) return verified;
    }
  }
  const versions = [keys.length > 0 ? "v1" : "", publicKeys.length > 0 ? "v1a" : ""].filter(Boolean);
  throw new WebhookVerificationError(
    "invalid_signature",
    `no ${versions.join(" or ")} signature in webhook-signature matches`,
  );
}

/** `whpk_` (and, to be refused with a reason, `whsk_`): an Ed25519 key, not an HMAC secret. */
function isEd25519Key(key: string): boolean {
  return key.startsWith(PUBLIC_KEY_PREFIX) || key.startsWith(SECRET_KEY_PREFIX);
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof headers.get === "function")
    return (headers as { get(n: string): string | null }).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  let value = record[name];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === name);
    if (key !== undefined) value = record[key];
  }
  // A header some frameworks hand over as an array (repeated) lists signatures: join with spaces.
  return Array.isArray(value) ? value.join(" ") : (value as string | undefined);
}
