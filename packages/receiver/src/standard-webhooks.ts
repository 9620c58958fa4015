import { createHmac, timingSafeEqual } from "node:crypto";
import { bodyBytes, type RawBody } from "./body.js";
import { standardWebhookKey } from "./standard-webhooks-secret.js";
import { WebhookVerificationError } from "./webhook-verification-error.js";

/** The Standard Webhooks default: requests more than 5 minutes off the receiver's clock are refused. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

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

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, the signature of one message. */
export function signStandardWebhook(
  id: string,
  timestamp: Date | number,
  body: RawBody,
  secret: Secret,
): string {
  const seconds =
    typeof timestamp === "number" ? Math.floor(timestamp) : Math.floor(timestamp.getTime() / 1000);
  const mac = createHmac("sha256", standardWebhookKey(secret))
    .update(`${id}.${seconds}.`, "utf8")
    .update(bodyBytes(body))
    .digest("base64");
  return `v1,${mac}`;
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
 * (replay protection) and one of the space-separated `v1,` signatures must match, compared in
 * constant time. Throws a WebhookVerificationError naming what failed.
 */
export function verifyStandardWebhook(
  rawBody: RawBody,
  headers: HeaderSource,
  secret: Secret | readonly Secret[],
  options: VerifyOptions = {},
): VerifiedWebhook {
  // Several secrets: while rotating, the receiver accepts the old one and the new one.
  const keys = (Array.isArray(secret) ? (secret as readonly Secret[]) : [secret as Secret]).map((s) =>
    standardWebhookKey(s),
  );
  if (keys.length === 0) throw new WebhookVerificationError("invalid_secret", "no secret given");
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
  for (const entry of signatures.split(" ")) {
    const [version, signature] = entry.split(",", 2);
    // Other versions (v1a: asymmetric) are for other verifiers; skip them, as the spec says.
    if (version !== "v1" || !signature) continue;
    const given = Buffer.from(signature, "utf8");
    for (const e of expected) {
      if (given.length === e.length && timingSafeEqual(given, e)) {
        return { id, timestamp: new Date(seconds * 1000) };
      }
    }
  }
  throw new WebhookVerificationError("invalid_signature", "no v1 signature in webhook-signature matches");
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
