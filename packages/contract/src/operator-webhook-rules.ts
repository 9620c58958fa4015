import { sharedSecretViolations, urlsViolations } from "./destination-rules.js";
import type { FieldViolation } from "./grpc/hookpost-error.js";

/**
 * Operational webhooks (docs/api.md#operational-webhooks): the events Hookpost sends to the
 * operator's URLs, and the rules of an operator webhook's settings, for the admin API, the CLI
 * and its apply files alike.
 */
export const OPERATOR_EVENT_TYPES = [
  "destination.failing",
  "destination.recovered",
  "destination.disabled",
  "destination.behind",
  "dead_letter.created",
] as const;
export type OperatorEventType = (typeof OPERATOR_EVENT_TYPES)[number];

export function isOperatorEventType(t: string): t is OperatorEventType {
  return (OPERATOR_EVENT_TYPES as readonly string[]).includes(t);
}

/** Each one costs a delivery per event: a handful of pagers and chat hooks, not a fan-out. */
export const MAX_OPERATOR_WEBHOOKS = 10;
/** Its delivery target (`_ops_<id>`) is a destination id of at most 64 characters. */
export const MAX_OPERATOR_WEBHOOK_ID_CHARS = 59;

/** destination.failing below this success rate, unless the webhook sets its own. */
export const DEFAULT_FAILING_BELOW = 0.5;
export const MIN_FAILING_BELOW = 0.01;
/** destination.behind when the oldest pending call waited this long, unless the webhook sets its own. */
export const DEFAULT_BEHIND_AFTER_MS = 15 * 60_000;
export const MIN_BEHIND_AFTER_MS = 1000;
export const MAX_BEHIND_AFTER_MS = 7 * 24 * 3_600_000;

/**
 * The success rate at or above which a failing destination counts as recovered: halfway between
 * the threshold and 1 (0.5 -> 0.75, 0.9 -> 0.95), so that a rate hovering at the threshold does
 * not flip the state at every look (hysteresis).
 */
export function recoveredAtOrAbove(failingBelow: number): number {
  return failingBelow + (1 - failingBelow) / 2;
}

/** Event types: known ones, each listed once. Empty: every type. */
export function eventTypesViolations(types: readonly string[], field: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  const seen = new Set<string>();
  types.forEach((t, i) => {
    if (!isOperatorEventType(t)) {
      out.push({
        field: `${field}[${i}]`,
        description: `unknown event type "${t.slice(0, 100)}": use ${OPERATOR_EVENT_TYPES.join(", ")}`,
      });
    } else if (seen.has(t)) out.push({ field: `${field}[${i}]`, description: `"${t}" is listed twice` });
    seen.add(t);
  });
  return out;
}

/** One absolute http(s) URL, as a destination's, without placeholders. */
export function operatorUrlViolations(url: string, field: string): FieldViolation[] {
  if (url.includes("{{"))
    return [{ field, description: "placeholders ({{ }}) are not allowed in an operator webhook's URL" }];
  // The destination rule reports at `field[0]`: one URL here.
  return urlsViolations([url], field).map((v) => ({ ...v, field }));
}

/** Optional; when set, 0.01 to 1. */
export function failingBelowViolations(value: number | undefined, field: string): FieldViolation[] {
  if (value === undefined) return [];
  if (!Number.isFinite(value) || value < MIN_FAILING_BELOW || value > 1) {
    return [
      {
        field,
        description: `must be a success rate from ${MIN_FAILING_BELOW} to 1 (0.5: fewer than half the attempts succeeded), got ${value}; leave it unset for ${DEFAULT_FAILING_BELOW}`,
      },
    ];
  }
  return [];
}

/** Optional; when set, 1 s to 7 days. */
export function behindAfterViolations(ms: number | undefined, field: string): FieldViolation[] {
  if (ms === undefined) return [];
  if (!Number.isFinite(ms) || ms < MIN_BEHIND_AFTER_MS || ms > MAX_BEHIND_AFTER_MS) {
    return [
      {
        field,
        description: `must be 1s to 7d, got ${ms} ms; leave it unset for 15m`,
      },
    ];
  }
  return [];
}

/** A Standard Webhooks secret (`whsec_` + base64 of 24 to 64 bytes); absent: generated. */
export function operatorSecretViolations(secret: string | undefined, field: string): FieldViolation[] {
  return secret === undefined ? [] : sharedSecretViolations(secret, "standard-webhooks", field);
}
