/** What the source check needs of the configuration store (core's ConfigStore). */
interface SourceLookup {
  source(id: string): unknown;
}

import { ConsentMissing, Ordering } from "./gen/hookpost/v1/admin_pb.js";
import type { FieldViolation } from "./grpc/hookpost-error.js";
/** How a destination's webhooks are signed. */
export type Signing = "segment" | "standard-webhooks" | "standard-webhooks-ed25519";

import { whskProblem } from "./ed25519-secret-key.js";
import { fillTemplate, isTemplate, parseTemplate, urlPathStart } from "./template.js";
import { hasLineBreakOrNul, hasSpaceOrControl, isHeaderValueText, STANDARD_BASE64 } from "./text.js";

/** The rules of SPEC section 4 for a webhook destination, one function per field. */

export const MAX_URLS = 5;
export const MAX_URL_CHARS = 2048;
export const MAX_HEADERS = 5;
export const MAX_HEADER_NAME_CHARS = 128;
export const MAX_HEADER_VALUE_CHARS = 4096;
export const MAX_SOURCES = 100;
export const MAX_SECRET_CHARS = 1024;
export const WHSEC_MIN_BYTES = 24;
export const WHSEC_MAX_BYTES = 64;

/**
 * Header names we set ourselves (SPEC section 4), plus hop-by-hop headers that the HTTP
 * client refuses or that would break the request. `webhook-*` is refused as well.
 */
const RESERVED_HEADERS = new Set([
  "content-type",
  "content-length",
  "host",
  "user-agent",
  "x-signature",
  "x-signature-next",
  "idempotency-key",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "expect",
  "te",
  "trailer",
  "proxy-connection",
]);

export const MAX_RATE_LIMIT_PER_SECOND = 10_000;
export const MAX_IN_FLIGHT = 1000;

/** Optional; when set, 1..10000 deliveries per second (unset means no limit, never 0). */
export function rateLimitViolations(value: number | undefined, field: string): FieldViolation[] {
  return boundViolations(value, field, MAX_RATE_LIMIT_PER_SECOND, "leave it unset for no limit");
}

/** Optional; when set, 1..1000 requests in flight across replicas. */
export function maxInFlightViolations(value: number | undefined, field: string): FieldViolation[] {
  return boundViolations(value, field, MAX_IN_FLIGHT, "leave it unset for DELIVERY_CONCURRENCY per replica");
}

function boundViolations(value: number | undefined, field: string, max: number, unset: string) {
  const { out, bad } = collector();
  if (value !== undefined && (value < 1 || value > max))
    bad(field, `must be 1 to ${max}, got ${value}; ${unset}`);
  return out;
}

/**
 * Delivery order of a destination (hookpost.v1.Ordering): UNSPECIFIED reads as UNORDERED on a
 * create and keeps the current value on an update without a mask. Anything else (a newer client's
 * value, or garbage) is refused rather than silently delivered unordered.
 */
export function orderingViolations(value: number, field: string): FieldViolation[] {
  return enumViolations(value, Ordering, field, "ordering");
}

/**
 * A value of a proto enum that this server knows (UNSPECIFIED included: it reads as the default),
 * else one violation naming the values to use, e.g. `unknown ordering 7: use ORDERING_UNORDERED or
 * ORDERING_PER_USER`. `e` is the generated enum object; `name` the field's proto name.
 */
function enumViolations(
  value: number,
  e: Record<string, string | number>,
  field: string,
  name: string,
): FieldViolation[] {
  const names = Object.entries(e).filter(([, v]) => typeof v === "number");
  if (names.some(([, v]) => v === value)) return [];
  const use = names
    .filter(([n]) => n !== "UNSPECIFIED")
    .map(([n]) => `${name.toUpperCase()}_${n}`)
    .join(" or ");
  return [{ field, description: `unknown ${name} ${value}: use ${use}` }];
}

export const MAX_CONSENT_CATEGORIES = 20;
export const MAX_CONSENT_CATEGORY_CHARS = 100;

/**
 * A destination's consent categories (the rule is in consent.ts): at most 20, each 1..100
 * characters of printable text (no control characters, not blank), none listed twice
 * (case-sensitive: "Analytics" and "analytics" are two categories). Empty: no requirement.
 */
export function consentCategoriesViolations(categories: readonly string[], field: string): FieldViolation[] {
  const { out, bad } = collector();
  if (categories.length > MAX_CONSENT_CATEGORIES) {
    bad(field, `at most ${MAX_CONSENT_CATEGORIES} consent categories, got ${categories.length}`);
    return out;
  }
  const seen = new Set<string>();
  categories.forEach((c, i) => {
    const problem = categoryProblem(c) ?? (seen.has(c) ? `"${clip(c)}" is listed twice` : undefined);
    if (problem) bad(`${field}[${i}]`, problem);
    seen.add(c);
  });
  return out;
}

function categoryProblem(c: string): string | undefined {
  const chars = [...c].length;
  if (c.trim() === "") return `is empty: a consent category is 1 to ${MAX_CONSENT_CATEGORY_CHARS} characters`;
  if (chars > MAX_CONSENT_CATEGORY_CHARS) {
    return `is too long: at most ${MAX_CONSENT_CATEGORY_CHARS} characters, got ${chars}`;
  }
  // C0 and C1 controls, DEL, and lone surrogates (not text).
  if (/[\p{Cc}\p{Cs}]/u.test(c)) return "must not contain control characters";
  return undefined;
}

/**
 * What a call without a consent object gets (hookpost.v1.ConsentMissing): UNSPECIFIED reads as
 * DELIVER on a create and keeps the current value on an update without a mask; anything else is
 * refused, like an unknown ordering.
 */
export function consentMissingViolations(value: number, field: string): FieldViolation[] {
  return enumViolations(value, ConsentMissing, field, "consent_missing");
}

/** RFC 7230 token: one or more tchar. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

type Bad = (field: string, description: string) => void;

function collector(): { out: FieldViolation[]; bad: Bad } {
  const out: FieldViolation[] = [];
  return { out, bad: (field, description) => out.push({ field, description }) };
}

/** Non-empty, no duplicates, and every id names an existing source. */
export function sourceIdsViolations(
  ids: readonly string[],
  field: string,
  store: SourceLookup,
): FieldViolation[] {
  return listViolations(ids, field, {
    empty: "connect at least one source",
    max: MAX_SOURCES,
    noun: "sources",
    item: (id) => (id === "" ? "is empty" : undefined),
    twice: (id) => `source "${clip(id)}" is listed twice`,
    known: (id) => (store.source(id) ? undefined : `source "${clip(id)}" does not exist`),
  });
}

/** 1..5 absolute http/https URLs without credentials or fragment. */
export function urlsViolations(urls: readonly string[], field: string): FieldViolation[] {
  return listViolations(urls, field, {
    empty: "at least one webhook URL is required",
    max: MAX_URLS,
    noun: "URLs",
    item: urlProblem,
    twice: () => "is listed twice",
  });
}

/**
 * A list field's rules: not empty, at most `max` items; then each item's own problem (`item`),
 * else a repeat (`twice`), else `known`; reported at `field[i]`.
 */
function listViolations(
  items: readonly string[],
  field: string,
  rules: {
    empty: string;
    max: number;
    noun: string;
    item: (value: string) => string | undefined;
    twice: (value: string) => string;
    /** Checked last, on an item listed once. */
    known?: (value: string) => string | undefined;
  },
): FieldViolation[] {
  const { out, bad } = collector();
  if (items.length === 0) bad(field, rules.empty);
  else if (items.length > rules.max) bad(field, `at most ${rules.max} ${rules.noun}, got ${items.length}`);
  else {
    const seen = new Set<string>();
    items.forEach((value, i) => {
      const problem = rules.item(value) ?? (seen.has(value) ? rules.twice(value) : rules.known?.(value));
      if (problem) bad(`${field}[${i}]`, problem);
      seen.add(value);
    });
  }
  return out;
}

function urlProblem(template: string): string | undefined {
  if (template === "") return "is empty";
  if (template.length > MAX_URL_CHARS) return `is too long: at most ${MAX_URL_CHARS} characters`;
  // Templates (template.ts): checked as the URL they render to, placeholders after the host only.
  let raw = template;
  if (isTemplate(template)) {
    const parts = parseTemplate(template);
    if (typeof parts === "string") return parts;
    const first = template.indexOf("{{");
    if (first < urlPathStart(template)) {
      return "placeholders ({{ }}) are allowed in the path and query only, not in the scheme, host or port";
    }
    raw = fillTemplate(parts, "x");
  }
  // URL parsing silently drops tabs and line breaks and trims spaces: refuse them instead,
  // so the URL stored is the URL called.
  if (hasSpaceOrControl(raw)) return "must not contain spaces or control characters";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `"${clip(raw)}" is not an absolute URL (e.g. https://example.com/hook)`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `scheme "${clip(url.protocol.slice(0, -1))}" is not allowed: use http or https`;
  }
  if (!/^https?:\/\//i.test(raw)) return "must start with http:// or https://";
  if (url.hostname === "") return "has no host";
  if (url.username !== "" || url.password !== "") {
    return "must not contain credentials (user:password@); use a static header instead";
  }
  if (raw.includes("#")) return "must not contain a fragment (#...): it is never sent to the server";
  return undefined;
}

/** At most 5 headers; names are HTTP tokens and not reserved; values are single-line text. */
export function headersViolations(
  headers: Readonly<Record<string, string>>,
  field: string,
): FieldViolation[] {
  const { out, bad } = collector();
  const entries = Object.entries(headers);
  if (entries.length > MAX_HEADERS) {
    bad(field, `at most ${MAX_HEADERS} headers, got ${entries.length}`);
    return out;
  }
  const seen = new Map<string, string>();
  for (const [name, value] of entries) {
    const f = `${field}[${JSON.stringify(clip(name))}]`;
    const lower = name.toLowerCase();
    if (name === "") bad(f, "a header name is required");
    else if (name.length > MAX_HEADER_NAME_CHARS)
      bad(f, `name is too long: at most ${MAX_HEADER_NAME_CHARS}`);
    else if (!TOKEN.test(name)) bad(f, "name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)");
    else if (RESERVED_HEADERS.has(lower) || lower.startsWith("webhook-")) {
      bad(f, `"${name}" is set by Hookpost and cannot be configured`);
    } else if (seen.has(lower)) bad(f, `duplicates header "${seen.get(lower)}" (names are case-insensitive)`);
    const parts = isTemplate(value) ? parseTemplate(value) : undefined;
    if (value.length > MAX_HEADER_VALUE_CHARS) {
      bad(f, `value is too long: at most ${MAX_HEADER_VALUE_CHARS} characters`);
    } else if (typeof parts === "string") {
      bad(f, `value: ${parts}`);
    } else if (hasLineBreakOrNul(value)) {
      bad(f, "value must not contain CR, LF or NUL");
    } else if (!isHeaderValueText(value)) {
      bad(f, "value may only hold printable characters (Latin-1), spaces and tabs");
    }
    seen.set(lower, name);
  }
  return out;
}

/**
 * The shared secret for the signing chosen. `segment`: any text up to 1024 characters,
 * optional. `standard-webhooks`: required, `whsec_` + base64 of 24 to 64 bytes, so that
 * the reference Standard Webhooks libraries accept our signatures. `standard-webhooks-ed25519`:
 * a `whsk_` Ed25519 private key; optional, as the server generates one when none is given.
 * `current` says the secret kept from the stored record (updates), for the message.
 */
export function sharedSecretViolations(
  secret: string | undefined,
  signing: Signing,
  field: string,
  current = false,
): FieldViolation[] {
  const { out, bad } = collector();
  const which = current ? "the current shared secret" : "the shared secret";
  if (secret === undefined) {
    if (signing === "standard-webhooks") {
      bad(
        field,
        "standard-webhooks signing needs a shared secret (whsec_ + base64 of 24 to 64 random bytes)",
      );
    }
    return out;
  }
  if (secret.length > MAX_SECRET_CHARS) {
    bad(field, `is too long: at most ${MAX_SECRET_CHARS} characters`);
    return out;
  }
  const problem = secretProblem(signing, secret);
  if (problem) bad(field, `${which} is not ${SECRET_NOUN[signing]}: ${problem}`);
  return out;
}

/** What a secret of each signing is, for messages. */
const SECRET_NOUN: Record<Signing, string> = {
  segment: "a secret",
  "standard-webhooks": "a Standard Webhooks secret",
  "standard-webhooks-ed25519": "an Ed25519 secret key (whsk_)",
};

/** Why `secret` cannot sign with `signing`; undefined when it can. */
function secretProblem(signing: Signing, secret: string): string | undefined {
  if (signing === "standard-webhooks") return whsecProblem(secret);
  if (signing === "standard-webhooks-ed25519") return whskProblem(secret);
  return undefined;
}

/**
 * The previous secret of a rotation signs beside the current one until its overlap ends, so with
 * standard-webhooks signing it must be a Standard Webhooks secret too (a whsk_ key with
 * standard-webhooks-ed25519): otherwise every delivery of the overlap would fail before a request
 * is sent. Checked on the record a write would store (create, update, rotate), with the secrets
 * that still sign at the time of the write.
 */
export function previousSecretViolations(
  record: {
    signing: Signing;
    previousSecret?: string | undefined;
    previousSecretExpiresAt?: string | undefined;
  },
  /** The secrets that still sign at the time of the write (core's signingSecrets). */
  stillSigning: readonly string[],
  field: string,
): FieldViolation[] {
  const previous = record.previousSecret;
  if (previous === undefined || !stillSigning.includes(previous)) return [];
  const problem = secretProblem(record.signing, previous);
  if (!problem) return [];
  return [
    {
      field,
      description:
        `${record.signing} signing signs with every secret still valid, and the previous secret ` +
        `(rotated out, valid until ${record.previousSecretExpiresAt}) is not ${SECRET_NOUN[record.signing]}: ` +
        `${problem}. Switch after the overlap, or first set shared_secret (which ends the overlap) ` +
        "or rotate with previous_valid_for 0",
    },
  ];
}

function whsecProblem(secret: string): string | undefined {
  if (!secret.startsWith("whsec_")) return "it must start with whsec_";
  const b64 = secret.slice("whsec_".length);
  if (!STANDARD_BASE64.test(b64) || b64 === "")
    return "after whsec_ comes standard base64 (A-Z a-z 0-9 + /, = padding)";
  const bytes = Buffer.from(b64, "base64").length;
  if (bytes < WHSEC_MIN_BYTES || bytes > WHSEC_MAX_BYTES) {
    return `it decodes to ${bytes} bytes; use ${WHSEC_MIN_BYTES} to ${WHSEC_MAX_BYTES}`;
  }
  return undefined;
}

function clip(text: string, max = 80): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
