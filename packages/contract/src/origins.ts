import type { FieldViolation } from "./grpc/hookpost-error.js";

/**
 * A source's `allowed_origins` (issue 29), one rule for every party: the admin API refuses what
 * breaks it, the CLI's `apply -f` checks a file with it, the HTTP API's CORS answers with
 * `originAllowed`. Browser-safe (no Node import).
 *
 * An entry is a web origin as a browser sends it in `Origin`: `http` or `https`, a host, an
 * optional port, nothing else (`https://shop.example.com`, `http://localhost:3000`). A host may
 * start with `*.` for every subdomain at any depth (`https://*.example.com` allows
 * `https://a.example.com` and `https://a.b.example.com`, not `https://example.com`). Stored
 * normalised as browsers write origins: lower case, no default port, no trailing slash.
 */

export const MAX_ALLOWED_ORIGINS = 100;
/** Longer than any real origin (a host name is at most 253 characters). */
export const MAX_ORIGIN_CHARS = 300;

const WILDCARD = "*.";
/** What a wildcard stands for: one or more host labels (as browsers write them, lower case). */
const SUBDOMAIN = /^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/;

/**
 * The origin as stored, or a problem. Accepts what a person would type (`HTTPS://Shop.Example.com/`,
 * `https://shop.example.com:443`) and answers the form a browser sends.
 */
export function normalizeOrigin(text: string): { origin: string } | { problem: string } {
  const value = text.trim();
  if (value === "") return { problem: "is empty" };
  if (value.length > MAX_ORIGIN_CHARS) return { problem: `is longer than ${MAX_ORIGIN_CHARS} characters` };
  if (value === "*" || value === "null") {
    return { problem: `"${value}" is not an origin: leave allowed_origins empty to allow any` };
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(value);
  if (!scheme)
    return { problem: "must start with http:// or https:// (for example https://shop.example.com)" };
  const rest = value.slice(scheme[0].length);
  const wildcard = rest.startsWith(WILDCARD);
  // A stand-in label lets the URL parser check the rest of a wildcard host.
  const parsedText = wildcard ? `${scheme[0]}wildcard-label.${rest.slice(WILDCARD.length)}` : value;
  let url: URL;
  try {
    url = new URL(parsedText);
  } catch {
    return { problem: "is not a valid origin (scheme://host[:port])" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return { problem: "must use http or https" };
  if (url.username !== "" || url.password !== "")
    return { problem: "must not contain a user name or password" };
  if (url.search !== "" || url.hash !== "" || !/^\/?$/.test(url.pathname) || /[?#]/.test(rest)) {
    return { problem: "must be an origin only (scheme://host[:port]), without a path, query or fragment" };
  }
  if (rest.replace(/\/$/, "").includes("/")) {
    return { problem: "must be an origin only (scheme://host[:port]), without a path, query or fragment" };
  }
  if (rest.slice(wildcard ? WILDCARD.length : 0).includes("*")) {
    return { problem: "may use * only as the first label of the host (https://*.example.com)" };
  }
  const origin = url.origin;
  if (!wildcard) return { origin };
  return { origin: origin.replace("://wildcard-label.", `://${WILDCARD}`) };
}

/** The problems of a list of origins, at `field[i]` (an empty list is valid: any origin). */
export function allowedOriginsViolations(origins: readonly string[], field: string): FieldViolation[] {
  if (origins.length > MAX_ALLOWED_ORIGINS) {
    return [{ field, description: `at most ${MAX_ALLOWED_ORIGINS} origins, got ${origins.length}` }];
  }
  const out: FieldViolation[] = [];
  const seen = new Set<string>();
  origins.forEach((text, i) => {
    const result = normalizeOrigin(text);
    if ("problem" in result) out.push({ field: `${field}[${i}]`, description: result.problem });
    else if (seen.has(result.origin)) out.push({ field: `${field}[${i}]`, description: "is listed twice" });
    else seen.add(result.origin);
  });
  return out;
}

/** The list as stored (call after allowedOriginsViolations found nothing). */
export function normalizeOrigins(origins: readonly string[]): string[] {
  return origins.map((o) => {
    const result = normalizeOrigin(o);
    if ("problem" in result) throw new Error(`invalid origin ${JSON.stringify(o)}: ${result.problem}`);
    return result.origin;
  });
}

/**
 * Whether a browser at `origin` (the request's `Origin` header) may send a source's calls:
 * any origin when `allowed` is empty, else an exact entry or a wildcard entry's subdomain.
 * Browsers send origins normalised; anything else (a hand-made header) simply does not match.
 */
export function originAllowed(origin: string, allowed: readonly string[] | undefined): boolean {
  if (allowed === undefined || allowed.length === 0) return true;
  for (const entry of allowed) {
    if (entry === origin) return true;
    const star = entry.indexOf(`://${WILDCARD}`);
    if (star < 0) continue;
    // `https://*.example.com:8443` → scheme `https://`, suffix `.example.com:8443`.
    const scheme = entry.slice(0, star + 3);
    const suffix = entry.slice(star + 3 + WILDCARD.length - 1);
    if (
      origin.startsWith(scheme) &&
      origin.endsWith(suffix) &&
      origin.length > scheme.length + suffix.length &&
      SUBDOMAIN.test(origin.slice(scheme.length, origin.length - suffix.length))
    ) {
      return true;
    }
  }
  return false;
}
