/**
 * Portal links (docs/security.md#portal-links): the rules every party shares (the admin API, the
 * CLI, the console). The console imports this file directly: it must stay free of Node modules.
 */
import type { FieldViolation } from "./grpc/hookpost-error.js";
import { hasControlChar } from "./text.js";

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/**
 * How long a link works. Short by default: an operator embedding the console mints a link per
 * session; at most 30 days, so a forgotten link does not stay a credential for ever.
 */
export const PORTAL_LINK_LIFETIME = { defaultMs: DAY_MS, minMs: MINUTE_MS, maxMs: 30 * DAY_MS } as const;

/** Links of one source that work at once (neither expired nor revoked): more is RESOURCE_EXHAUSTED. */
export const MAX_PORTAL_LINKS_PER_SOURCE = 100;

export const MAX_PORTAL_LINK_NAME_CHARS = 100;

/**
 * A link creates no destination for a source that has this many already (each costs configuration
 * bytes and routing on every replica); the operator, with the admin token, may add more.
 */
export const MAX_PORTAL_DESTINATIONS_PER_SOURCE = 50;

/**
 * Writes one link may make, per ingest replica: every write (refused ones too) leaves audit
 * records, and the audit log refuses every admin write once full, so a link cannot fill it for
 * everyone. Far above what a person does in the console; beyond it RESOURCE_EXHAUSTED.
 */
export const PORTAL_LINK_WRITE_RATE = { perMinute: 60, burst: 120 } as const;

/** The console's URL fragment carrying a link's token: `/console/#portal=<token>`. */
export const PORTAL_FRAGMENT_KEY = "portal";

/** Every portal link token starts with this (the admin API tells them from the admin token by it). */
export const PORTAL_TOKEN_PREFIX = "hpl.";

/** The lifetime asked for (undefined: the default), or its violation. */
export function portalLinkLifetimeViolations(ms: number | undefined, field: string): FieldViolation[] {
  if (ms === undefined) return [];
  const { minMs, maxMs } = PORTAL_LINK_LIFETIME;
  if (!Number.isFinite(ms) || ms < minMs || ms > maxMs) {
    return [{ field, description: `must be 1 minute to 30 days (default 24 hours), got ${ms} ms` }];
  }
  return [];
}

export function portalLinkNameViolations(name: string, field: string): FieldViolation[] {
  if ([...name].length > MAX_PORTAL_LINK_NAME_CHARS) {
    return [{ field, description: `is longer than ${MAX_PORTAL_LINK_NAME_CHARS} characters` }];
  }
  if (hasControlChar(name)) return [{ field, description: "must not contain control characters" }];
  return [];
}

/**
 * The URL a link is handed out as: the console's address with the token in the fragment, which
 * browsers never send to a server nor put in a Referer. `consoleUrl` unset: the path alone.
 */
export function portalLinkUrl(consoleUrl: string | undefined, token: string): string {
  const base = (consoleUrl ?? "/console/").replace(/#.*$/, "");
  return `${base}#${PORTAL_FRAGMENT_KEY}=${token}`;
}
