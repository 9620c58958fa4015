import type { Destination, Source } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { ApiError } from "../api.js";
import { FieldError, FormError } from "./notice.js";

/** What the form edits, as the request needs it. */
export interface DestinationValues {
  id: string;
  name: string;
  sourceIds: string[];
  urls: string[];
  headers: Record<string, string>;
  signing: Signing;
  /** Empty: keep the current secret (edit) or none (create). */
  sharedSecret: string;
  enabled: boolean;
}

export const FORM_FIELDS = ["id", "name", "source_ids", "urls", "headers", "signing", "shared_secret"].map(
  (f) => `destination.${f}`,
);

/** The signing modes the form offers, with their labels. */
const SIGNING_OPTIONS: [Signing, string][] = [
  [Signing.SEGMENT, "X-Signature (HMAC-SHA1)"],
  [Signing.STANDARD_WEBHOOKS, "Standard Webhooks"],
  [Signing.STANDARD_WEBHOOKS_ED25519, "Standard Webhooks, Ed25519"],
];

/** `Name: value` per line; a line without a colon is a name with an empty value (the API says why). */
function parseHeaders(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const i = line.indexOf(":");
    if (i < 0) out[line.trim()] = "";
    else out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

function read(form: HTMLFormElement): DestinationValues {
  const f = new FormData(form);
  const text = (k: string) => String(f.get(k) ?? "");
  return {
    id: text("id").trim(),
    name: text("name"),
    sourceIds: f.getAll("source").map(String),
    urls: text("urls")
      .split("\n")
      .map((u) => u.trim())
      .filter(Boolean),
    headers: parseHeaders(text("headers")),
    signing: Number(text("signing")) as Signing,
    sharedSecret: text("secret"),
    enabled: f.get("enabled") === "on",
  };
}

/**
 * The settings of a destination, for create (`initial` undefined) and edit. The shared secret
 * is write-only: the form only says whether one is set.
 */
export function DestinationForm(props: {
  initial: Destination | undefined;
  sources: Source[];
  error: ApiError | undefined;
  busy: boolean;
  submitLabel: string;
  onSubmit: (v: DestinationValues) => void;
}) {
  const d = props.initial;
  const creating = d === undefined;
  const submit = (e: Event) => {
    e.preventDefault();
    props.onSubmit(read(e.currentTarget as HTMLFormElement));
  };
  const headerText = d
    ? Object.entries(d.headers)
        .map(([k, v]) => `${k}: ${v}`)
        .join("\n")
    : "";
  return (
    <form onSubmit={submit} class="destination-form" noValidate>
      <FormError error={props.error} fields={FORM_FIELDS} />
      {creating ? (
        <label>
          Id <span class="muted">(optional; letters, digits, - and _)</span>
          <input name="id" autoComplete="off" />
          <FieldError error={props.error} field="destination.id" />
        </label>
      ) : null}
      <label>
        Name
        <input name="name" defaultValue={d?.name ?? ""} autoComplete="off" />
        <FieldError error={props.error} field="destination.name" />
      </label>
      <fieldset>
        <legend>Sources</legend>
        {props.sources.length === 0 ? (
          <p class="muted">No source yet: create one on the Sources page.</p>
        ) : null}
        {props.sources.map((s) => (
          <label key={s.id} class="inline">
            <input
              type="checkbox"
              name="source"
              value={s.id}
              defaultChecked={d?.sourceIds.includes(s.id) ?? props.sources.length === 1}
            />
            {s.name} <span class="muted">({s.id})</span>
          </label>
        ))}
        <FieldError error={props.error} field="destination.source_ids" />
      </fieldset>
      <label>
        Webhook URLs <span class="muted">(one per line, tried in order; at most 5)</span>
        <textarea name="urls" rows={2} defaultValue={d?.urls.join("\n") ?? ""} spellcheck={false} />
        <FieldError error={props.error} field="destination.urls" />
      </label>
      <label>
        Headers <span class="muted">(one "Name: value" per line; at most 5)</span>
        <textarea name="headers" rows={2} defaultValue={headerText} spellcheck={false} />
        <FieldError error={props.error} field="destination.headers" />
      </label>
      <div class="grid">
        <label>
          Signing
          {/* `selected` per option: Preact sets no defaultValue on a <select>, and a form saved
              showing the wrong mode would switch the destination to it. */}
          <select name="signing">
            {SIGNING_OPTIONS.map(([value, label]) => (
              <option key={value} value={String(value)} selected={value === (d?.signing || Signing.SEGMENT)}>
                {label}
              </option>
            ))}
          </select>
          <FieldError error={props.error} field="destination.signing" />
        </label>
        <label>
          Shared secret{" "}
          <span class="muted">
            {creating ? "(optional)" : d.sharedSecretSet ? "(set; empty keeps it)" : "(not set)"}
            {" (Ed25519: a whsk_ key; generated when none)"}
          </span>
          <input name="secret" type="password" autoComplete="new-password" />
          <FieldError error={props.error} field="destination.shared_secret" />
        </label>
      </div>
      {creating ? (
        <label class="inline">
          <input type="checkbox" name="enabled" defaultChecked /> Deliver (enabled)
        </label>
      ) : (
        <input type="hidden" name="enabled" value={d.enabled === false ? "" : "on"} />
      )}
      <button type="submit" aria-busy={props.busy} disabled={props.busy}>
        {props.submitLabel}
      </button>
    </form>
  );
}
