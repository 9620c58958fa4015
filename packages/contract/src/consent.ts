/**
 * Consent per destination (issue 26), one rule for every party: the dispatcher's router applies
 * it, tests check against it and docs/api.md states it. Browser-safe (no Node or gRPC import): the
 * console shows filter reasons with `filteredText` through `@hookpost/contract/consent`. The
 * limits of a destination's consent settings are in destination-rules.ts.
 *
 * A destination with consent categories C gets a call only when the call's
 * `context.consent.categoryPreferences` maps every category of C to `true` (Segment's consent
 * object). Missing, `false` or a non-boolean value: not granted. A call without a consent object
 * follows the destination's `consentMissing`: delivered unless it is "FILTER" (Segment's
 * default: a call without consent is not subject to enforcement). Deletion notices are never
 * filtered: an erasure must reach every destination.
 */

/** A destination's consent settings as stored (core's DestinationRecord carries these fields). */
export interface ConsentSettings {
  /** The categories a call must grant; absent or empty: no consent requirement. */
  consentCategories?: readonly string[] | undefined;
  /** "FILTER": a call without a consent object is filtered. Absent: delivered. */
  consentMissing?: "FILTER" | undefined;
}

/** What the rule decided for one call and one destination; `reason` when not delivered. */
export interface ConsentDecision {
  deliver: boolean;
  /** `consent: "Advertising" not granted`, `consent: no consent object`. */
  reason?: string;
}

const DELIVER: ConsentDecision = Object.freeze({ deliver: true });

/** The call's `context.consent.categoryPreferences` when it is an object, else undefined. */
export function categoryPreferences(context: unknown): Record<string, unknown> | undefined {
  const consent = objectOrUndefined(context)?.consent;
  return objectOrUndefined(objectOrUndefined(consent)?.categoryPreferences);
}

/** Whether the call (a stored call: its type and context) goes to a destination with `settings`. */
export function consentDecision(
  call: { type: string; context?: unknown },
  settings: ConsentSettings,
): ConsentDecision {
  const required = settings.consentCategories ?? [];
  if (required.length === 0 || call.type === "delete") return DELIVER;
  const preferences = categoryPreferences(call.context);
  if (preferences === undefined) {
    return settings.consentMissing === "FILTER"
      ? { deliver: false, reason: "consent: no consent object" }
      : DELIVER;
  }
  const refused = required.filter((c) => !Object.hasOwn(preferences, c) || preferences[c] !== true);
  if (refused.length === 0) return DELIVER;
  return {
    deliver: false,
    reason: `consent: ${refused.map((c) => JSON.stringify(c)).join(", ")} not granted`,
  };
}

/**
 * How the console and the CLI show a filtered delivery: `filtered: consent ("Advertising" not
 * granted)` for the reason `consent: "Advertising" not granted`; `filtered` without a reason.
 */
export function filteredText(reason: string | undefined): string {
  if (!reason) return "filtered";
  const at = reason.indexOf(": ");
  return at < 0 ? `filtered: ${reason}` : `filtered: ${reason.slice(0, at)} (${reason.slice(at + 2)})`;
}

function objectOrUndefined(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}
