import type { ComponentChildren } from "preact";
import { type ApiError, Code } from "../api.js";

/** What to do next, for the errors a person can act on (shown under the server's message). */
const HINTS: Partial<Record<Code, string>> = {
  [Code.Unavailable]:
    "Check that the Hookpost server runs and that this browser can reach it, then try again.",
  [Code.PermissionDenied]: "This sign-in may not see or change this. Ask whoever gave you access.",
  [Code.DeadlineExceeded]: "The server took too long to answer; try again.",
  [Code.ResourceExhausted]: "The server is busy; try again in a moment.",
};

/** Calm states (an id that does not exist, a feature not offered) next to real failures. */
const TESTIDS: Partial<Record<Code, string>> = {
  [Code.NotFound]: "not-found",
  [Code.Unavailable]: "unreachable",
  [Code.PermissionDenied]: "permission-denied",
};

/**
 * An API error as a readable block (never a blank page): the server's message, what to do next
 * and `children` (e.g. a way back); "not found" and "not offered yet" look calmer.
 */
export function ErrorNotice({
  error,
  what,
  children,
}: {
  error: ApiError | undefined;
  what?: string;
  children?: ComponentChildren;
}) {
  if (!error) return null;
  const calm = error.code === Code.Unimplemented || error.code === Code.NotFound;
  const hint = HINTS[error.code];
  return (
    <div
      class={calm ? "notice notice-info" : "notice notice-error"}
      role="alert"
      data-code={Code[error.code]}
      data-testid={TESTIDS[error.code]}
    >
      {what ? <strong>{what}: </strong> : null}
      {error.message}
      {hint ? <div class="small-text">{hint}</div> : null}
      {children ? <div class="small-text">{children}</div> : null}
    </div>
  );
}

/** Violations whose field is `field` or inside it (`destination.urls[1]` for `destination.urls`). */
export function violationsFor(error: ApiError | undefined, field: string): string[] {
  if (!error) return [];
  return error.violations
    .filter((v) => v.field === field || v.field.startsWith(`${field}[`) || v.field.startsWith(`${field}.`))
    .map((v) => (v.field === field ? v.description : `${v.field.slice(field.length)}: ${v.description}`));
}

/** The messages for one form field, shown right under it. */
export function FieldError({ error, field }: { error: ApiError | undefined; field: string }) {
  const list = violationsFor(error, field);
  if (list.length === 0) return null;
  return (
    <small class="field-error" data-field={field} role="alert">
      {list.join("; ")}
    </small>
  );
}

/**
 * The error of a form: violations of the listed fields appear under those fields; the message
 * shows here only when no field took it.
 */
export function FormError({ error, fields }: { error: ApiError | undefined; fields: string[] }) {
  if (!error) return null;
  const placed = error.violations.filter((v) =>
    fields.some((f) => violationsFor({ ...error, violations: [v] }, f).length),
  );
  if (placed.length > 0 && placed.length === error.violations.length) {
    return (
      <div class="notice notice-error" role="alert">
        Please correct the fields marked below.
      </div>
    );
  }
  return <ErrorNotice error={error} />;
}
