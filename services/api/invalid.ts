import { Code, type FieldViolation, HookpostError, MAX_REPORTED_VIOLATIONS } from "@hookpost/contract";

/**
 * Throws INVALID_ARGUMENT when there are violations. At most MAX_REPORTED_VIOLATIONS are sent
 * (a batch of a thousand bad calls must not produce an answer too large for gRPC trailers);
 * the message says how many were left out.
 */
export function throwIfInvalid(violations: readonly FieldViolation[]): void {
  if (violations.length === 0) return;
  const shown = violations.slice(0, MAX_REPORTED_VIOLATIONS).map((v) => ({
    field: clip(v.field, 200),
    description: clip(v.description, 300),
  }));
  const more = violations.length - shown.length;
  const text = shown.map((v) => `${v.field}: ${v.description}`).join("; ");
  throw new HookpostError(
    Code.INVALID_ARGUMENT,
    `invalid request: ${text}${more > 0 ? ` (and ${more} more)` : ""}`,
    shown,
  );
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
