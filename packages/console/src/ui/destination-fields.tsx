import { type ComponentChildren, createContext } from "preact";
import { useContext } from "preact/hooks";
import type { ApiError } from "../api.js";
import { FieldError } from "./notice.js";

/*
 * The destination form's labelled controls. Each shows its label, an optional hint and the
 * errors of its field (`destination.<field>`); the form's one error reaches every field through
 * FormErrorContext rather than a prop on each.
 */

/** The error the destination form shows now (the browser's reading of it, or the server's answer). */
export const FormErrorContext = createContext<ApiError | undefined>(undefined);

/** A label around `children`, with the hint in parentheses and the field's errors under it. */
export function Field(props: {
  label: string;
  hint?: ComponentChildren;
  field: string;
  children: ComponentChildren;
}) {
  const error = useContext(FormErrorContext);
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the control is `children`, inside the label.
    <label>
      {props.label}
      {props.hint === undefined ? null : (
        <>
          {" "}
          <span class="muted">({props.hint})</span>
        </>
      )}
      {props.children}
      <FieldError error={error} field={`destination.${props.field}`} />
    </label>
  );
}

/** A textarea; its field is `name` unless told. */
export function TextArea(props: {
  label: string;
  hint: ComponentChildren;
  name: string;
  field?: string;
  value: string;
  rows?: number;
  placeholder?: string;
}) {
  return (
    <Field label={props.label} hint={props.hint} field={props.field ?? props.name}>
      <textarea
        name={props.name}
        rows={props.rows ?? 2}
        defaultValue={props.value}
        placeholder={props.placeholder}
        spellcheck={false}
      />
    </Field>
  );
}

/** A one-line text field. */
export function TextInput(props: {
  label: string;
  hint: string;
  name: string;
  field: string;
  numeric?: boolean;
  value: string | number;
}) {
  return (
    <Field label={props.label} hint={props.hint} field={props.field}>
      <input
        name={props.name}
        inputMode={props.numeric ? "numeric" : undefined}
        defaultValue={props.value}
        autoComplete="off"
      />
    </Field>
  );
}

/**
 * A <select> of enum values; its field is `name` unless told. `selected` per option: Preact sets
 * no defaultValue on a <select>, and a form saved showing the wrong value would switch the
 * destination to it.
 */
export function Select<T extends number>(props: {
  label: string;
  name: string;
  field?: string;
  options: [T, string][];
  value: T;
}) {
  return (
    <Field label={props.label} field={props.field ?? props.name}>
      <select name={props.name}>
        {props.options.map(([value, label]) => (
          <option key={value} value={String(value)} selected={value === props.value}>
            {label}
          </option>
        ))}
      </select>
    </Field>
  );
}
