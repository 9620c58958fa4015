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
  secret: string,
): boolean {
  // A repeated header is ambiguous: refuse rather than pick one.
  const value = typeof header === "string" ? header : header?.length === 1 ? header[0] : undefined;
  if (!value || !secret) return false;
  const expected = Buffer.from(signSegment(rawBody, secret), "utf8");
  const given = Buffer.from(value.trim().toLowerCase(), "utf8");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
