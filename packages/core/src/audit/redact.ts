/**
 * Redaction for the audit log, by allow-list: a text value is kept only under a key known to hold
 * configuration that is not secret (ids, names, URLs, times, enum values); any other text becomes
 * REDACTED. A field added later (an encrypted secret, a signing key, a portal link token) is thus
 * redacted until someone decides it is safe to show. Header maps keep their names, never their
 * values (they often carry customers' API keys). Numbers and booleans are kept: no secret is one.
 */

export const REDACTED = "[redacted]";

/** Keys whose text is shown in audit records: configuration, never a credential. */
const SAFE_KEYS = new Set([
  "id",
  "name",
  "sourceId",
  "sourceIds",
  "destinationId",
  "resourceId",
  "messageId",
  "urls",
  // Operator webhooks (issue 28): where and what operational events go; the secret is not listed.
  "url",
  "eventTypes",
  "signing",
  "ordering",
  "consentCategories",
  "consentMissing",
  // Shaping (issue 27): what a destination receives is configuration worth auditing, not a secret.
  "types",
  "events",
  "expression",
  "mapping",
  "method",
  "createdAt",
  "updatedAt",
  "disabledReason",
  "disabledAt",
  "previousSecretExpiresAt",
  "writeKeyPrefix",
  // Web origins a source's browsers may send from (issue 29): public configuration.
  "allowedOrigins",
  // The id of an encryption key (ReencryptSecrets), not the key.
  "keyId",
  // update_mask.paths: field names.
  "paths",
  // Portal links: their settings and times (the token and its hash are never shown).
  "readOnly",
  "expiresAt",
  "revokedAt",
  "createdBy",
  "sourceCreatedAt",
]);
/**
 * URLs are shown without what can carry a credential: a password (`user:secret@host`, sent as
 * Basic auth) and a fragment (never sent to a server; a portal link carries its token there).
 */
const URL_KEYS = new Set(["url", "urls"]);
/** Maps of header name → value: names shown, values redacted. */
const HEADER_KEYS = new Set(["headers"]);
/**
 * A header name is shown only when it is a valid one (an RFC 7230 token): a malformed entry such
 * as "Authorization Bearer abc" (the colon forgotten) carries its value in its name.
 */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$/;
const INVALID_NAME = "[invalid name]";
/** A request is recorded before it is validated: bound what a malformed one can store. */
const MAX_TEXT = 2048;
const MAX_ITEMS = 100;
/** Fields that change on every write and say nothing about what changed. */
const BOOKKEEPING = new Set(["updatedAt"]);

/** A JSON-ready copy of `value` with every secret, key and header value replaced by REDACTED. */
export function redact(value: unknown): unknown {
  return redactIn(undefined, value, false);
}

function redactIn(key: string | undefined, value: unknown, safe: boolean): unknown {
  if (value === undefined || value === null) return value;
  if (typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "string") {
    if (value === "" || !safe) return value === "" ? "" : REDACTED;
    return clip(key !== undefined && URL_KEYS.has(key) ? withoutCredentials(value) : value);
  }
  if (value instanceof Uint8Array) return value.length === 0 ? "" : REDACTED;
  if (Array.isArray(value)) {
    const items = value.slice(0, MAX_ITEMS).map((v) => redactIn(key, v, safe));
    return value.length > MAX_ITEMS ? [...items, `… ${value.length - MAX_ITEMS} more`] : items;
  }
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      // Protobuf-es bookkeeping ($typeName) and unset fields.
      .filter(([k, v]) => !k.startsWith("$") && v !== undefined)
      .slice(0, MAX_ITEMS);
    if (key !== undefined && HEADER_KEYS.has(key)) {
      return Object.fromEntries(
        entries.map(([k], i) => [HEADER_NAME.test(k) ? k : `${INVALID_NAME} ${i + 1}`, REDACTED]),
      );
    }
    return Object.fromEntries(entries.map(([k, v]) => [clip(k), redactIn(k, v, SAFE_KEYS.has(k))]));
  }
  return REDACTED;
}

/**
 * An error message with the keys of its field paths (`destination.headers["…"]`) hidden unless
 * they are valid header names, for the same reason as above.
 */
export function redactFieldKeys(message: string): string {
  return message.replace(/\["((?:[^"\\]|\\.)*)"\]/g, (whole, key: string) => {
    let name: unknown;
    try {
      name = JSON.parse(`"${key}"`);
    } catch {
      name = undefined;
    }
    return typeof name === "string" && HEADER_NAME.test(name) ? whole : `[${JSON.stringify(INVALID_NAME)}]`;
  });
}

function withoutCredentials(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    // Not a URL as stored: nothing tells which part could be a secret.
    return REDACTED;
  }
  if (!u.password && !u.hash) return text;
  // As dead-letter records mask a password ("***"); a fragment says it was there.
  if (u.password) u.password = "***";
  if (u.hash) u.hash = REDACTED;
  return u.toString();
}

function clip(text: string): string {
  return text.length <= MAX_TEXT ? text : `${text.slice(0, MAX_TEXT)}… (${text.length} characters)`;
}

/**
 * Top-level fields whose value differs between two versions of a record, compared before
 * redaction (so a changed secret is named, though its value is not shown).
 */
export function changedFields(before: object | undefined, after: object | undefined): string[] {
  if (before === undefined || after === undefined) return [];
  const b = before as Record<string, unknown>;
  const a = after as Record<string, unknown>;
  return [...new Set([...Object.keys(b), ...Object.keys(a)])]
    .filter((k) => !BOOKKEEPING.has(k) && JSON.stringify(b[k]) !== JSON.stringify(a[k]))
    .sort();
}
