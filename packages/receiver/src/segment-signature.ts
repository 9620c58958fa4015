import { createHmac, timingSafeEqual } from "node:crypto";
import { bodyBytes, type RawBody } from "./body.js";

/**
 * `X-Signature` for a body: lowercase hex HMAC-SHA1 of the exact body bytes, keyed with the
 * destination's shared secret (the scheme of the system Hookpost reproduces).
 */
export function signSegment(body: RawBody, secret: string): string {
  return createHmac("sha1", secret).update(bodyBytes(body)).digest("hex");
}

/**
 * Checks an `X-Signature` header against the raw request body. Verify the bytes as received, before
 * any JSON parsing: re-serializing a parsed body can change it. The comparison takes the same time
 * wherever the first difference is, so the signature cannot be guessed byte by byte.
 */
export function verifySignature(
  rawBody: RawBody,
  header: string | readonly string[] | null | undefined,
  secret: string | readonly string[],
): boolean {
  // A repeated header is ambiguous: refuse rather than pick one.
  const value = typeof header === "string" ? header : header?.length === 1 ? header[0] : undefined;
  if (!value) return false;
  const given = Buffer.from(value.trim().toLowerCase(), "utf8");
  // Several secrets: while rotating, the receiver accepts the old one and the new one.
  const secrets = typeof secret === "string" ? [secret] : secret;
  let ok = false;
  for (const s of secrets) {
    if (!s) continue;
    const expected = Buffer.from(signSegment(rawBody, s), "utf8");
    // Every secret is tried (no early exit), so timing does not tell which one matched.
    if (given.length === expected.length && timingSafeEqual(given, expected)) ok = true;
  }
  return ok;
}

/** Request headers as Node (`req.headers`), fetch (`Headers`) or a plain object give them. */
type Headers =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * Checks a Segment-signed request across a secret rotation: `X-Signature` (signed with the oldest
 * secret still valid) or `X-Signature-Next` (the new secret, only during an overlap) must match one
 * of `secrets`. Pass the secret you use, or both while you switch.
 */
export function verifySegmentRequest(
  rawBody: RawBody,
  headers: Headers,
  secrets: string | readonly string[],
): boolean {
  const get = (name: string): string | readonly string[] | undefined => {
    if (typeof headers.get === "function")
      return (headers as { get(n: string): string | null }).get(name) ?? undefined;
    const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
    const key = Object.keys(record).find((k) => k.toLowerCase() === name);
    return key === undefined ? undefined : record[key];
  };
  const current = verifySignature(rawBody, get("x-signature"), secrets);
  const next = verifySignature(rawBody, get("x-signature-next"), secrets);
  return current || next;
}
