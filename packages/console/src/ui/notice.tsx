import { type ApiError, Code } from "../api.js";

/** An API error as a readable block (never a blank page); "not offered yet" looks calmer. */
export function ErrorNotice({ error, what }: { error: ApiError | undefined; what?: string }) {
  if (!error) return null;
  const unimplemented = error.code === Code.Unimplemented;
  return (
    <div
      class={unimplemented ? "notice notice-info" : "notice notice-error"}
      role="alert"
      data-code={Code[error.code]}
    >
      {what ? <strong>{what}: </strong> : null}
      {error.message}
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
