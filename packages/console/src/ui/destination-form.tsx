import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { Destination, DestinationSchema, Source } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DeliveryMode, HttpMethod, Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  batchingView,
  EVENT_TYPES,
  filterView,
  parseDuration,
  parseDurationList,
  retryView,
} from "@hookpost/contract/shaping-text";
import { useEffect, useRef, useState } from "preact/hooks";
import { type ApiError, Code } from "../api.js";
import { Field, FormErrorContext, Select, TextArea, TextInput } from "./destination-fields.js";
import { DryRunPanel, type DryRunTarget } from "./dry-run.js";
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
  /** Empty parts let every call through. */
  filter: { types: string[]; events: string[]; expression: string };
  /** Empty: the default body. */
  mapping: string;
  method: HttpMethod;
  /** Unset window and no delays: the server's schedule. */
  retry: { windowMs?: number; delaysMs: number[] };
  /** Undefined: one call per request; 0 or unset parts: the server's defaults. */
  batching?: { maxCalls: number; maxBytes: number; maxWaitMs?: number };
  deliveryMode: DeliveryMode;
}

/** The settings the form edits, as update-mask paths (the shared secret only when one is typed). */
export const FORM_PATHS = [
  "name",
  "source_ids",
  "urls",
  "headers",
  "signing",
  "filter",
  "mapping",
  "method",
  "retry",
  "batching",
  "delivery_mode",
];

export const FORM_FIELDS = ["id", ...FORM_PATHS, "shared_secret"].map((f) => `destination.${f}`);

/** The signing modes the form offers, with their labels. */
const SIGNING_OPTIONS: [Signing, string][] = [
  [Signing.SEGMENT, "X-Signature (HMAC-SHA1)"],
  [Signing.STANDARD_WEBHOOKS, "Standard Webhooks"],
  [Signing.STANDARD_WEBHOOKS_ED25519, "Standard Webhooks, Ed25519"],
];

const METHODS = [HttpMethod.POST, HttpMethod.PUT, HttpMethod.PATCH];

/** The delivery modes the form offers, with their labels. */
const DELIVERY_MODES: [DeliveryMode, string][] = [
  [DeliveryMode.FAILOVER, "Failover: URLs in order, the first 2xx ends it"],
  [DeliveryMode.FAN_OUT, "Fan-out: every URL gets every call"],
];

/** "POST", "PUT" or "PATCH" (unspecified reads as POST, as the server does). */
export function methodName(m: HttpMethod): string {
  return HttpMethod[m === HttpMethod.UNSPECIFIED ? HttpMethod.POST : m];
}

/** The request's destination for the form's values (create, update or a dry run's draft). */
export function destinationInit(v: DestinationValues): MessageInitShape<typeof DestinationSchema> {
  const { windowMs, delaysMs } = v.retry;
  // No schedule at all, not an empty one: the update then removes the destination's own.
  const retry =
    windowMs === undefined && delaysMs.length === 0
      ? {}
      : {
          retry: {
            ...(windowMs === undefined ? {} : { window: durationFromMs(windowMs) }),
            delays: delaysMs.map((ms) => durationFromMs(ms)),
          },
        };
  return {
    id: v.id,
    name: v.name,
    sourceIds: v.sourceIds,
    urls: v.urls,
    headers: v.headers,
    signing: v.signing,
    sharedSecret: v.sharedSecret,
    enabled: v.enabled,
    filter: v.filter,
    mapping: v.mapping,
    method: v.method,
    ...retry,
    ...(v.batching
      ? {
          batching: {
            maxCalls: v.batching.maxCalls,
            maxBytes: v.batching.maxBytes,
            ...(v.batching.maxWaitMs === undefined ? {} : { maxWait: durationFromMs(v.batching.maxWaitMs) }),
          },
        }
      : {}),
    deliveryMode: v.deliveryMode,
  };
}

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

const lines = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);

/** The form's values, or what the browser can already tell is wrong (durations), at its field. */
function read(form: HTMLFormElement): { values: DestinationValues } | { error: ApiError } {
  const f = new FormData(form);
  const text = (k: string) => String(f.get(k) ?? "");
  const violations: ApiError["violations"] = [];
  const durations = <T,>(field: string, parse: () => T): T | undefined => {
    try {
      return parse();
    } catch (err) {
      violations.push({ field: `destination.${field}`, description: (err as Error).message });
      return undefined;
    }
  };
  const windowText = text("retry-window").trim();
  const windowMs = windowText ? durations("retry.window", () => parseDuration(windowText)) : undefined;
  const delaysMs = durations("retry.delays", () => parseDurationList(text("retry-delays"))) ?? [];
  const waitText = text("batch-wait").trim();
  const maxWaitMs = waitText ? durations("batching.max_wait", () => parseDuration(waitText)) : undefined;
  const whole = (k: string) => Math.max(0, Math.floor(Number(text(k).trim() || "0")) || 0);
  if (violations.length > 0) {
    const message = violations.map((v) => `${v.field}: ${v.description}`).join("; ");
    return { error: { code: Code.InvalidArgument, message, violations } };
  }
  return {
    values: {
      id: text("id").trim(),
      name: text("name"),
      sourceIds: f.getAll("source").map(String),
      urls: lines(text("urls")),
      headers: parseHeaders(text("headers")),
      signing: Number(text("signing")) as Signing,
      sharedSecret: text("secret"),
      enabled: f.get("enabled") === "on",
      filter: {
        types: f.getAll("filter-type").map(String),
        events: lines(text("filter-events")),
        expression: text("filter-expression").trim(),
      },
      mapping: text("mapping").trim(),
      method: Number(text("method")) as HttpMethod,
      retry: windowMs === undefined ? { delaysMs } : { windowMs, delaysMs },
      ...(f.get("batching") === "on"
        ? {
            batching: {
              maxCalls: whole("batch-calls"),
              maxBytes: whole("batch-bytes"),
              ...(maxWaitMs === undefined ? {} : { maxWaitMs }),
            },
          }
        : {}),
      deliveryMode: Number(text("delivery-mode")) as DeliveryMode,
    },
  };
}

/** What a dry run of a draft signs with, in the panel's words. */
function draftNote(v: DestinationValues, stored: boolean): string {
  const signed = v.sharedSecret
    ? "signed with the secret typed above"
    : v.signing === Signing.STANDARD_WEBHOOKS_ED25519
      ? `signed with a throwaway key${stored ? ", not this destination's" : ""}`
      : "unsigned: a draft has no secret unless one is typed above";
  return `${stored ? "Unsaved changes" : "This form"}, as a draft: ${signed}; $destinationId is a made-up id.`;
}

/**
 * The settings of a destination, for create (`initial` undefined) and edit, with the dry run
 * beside them. The shared secret is write-only: the form only says whether one is set.
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
  const form = useRef<HTMLFormElement>(null);
  const [readError, setReadError] = useState<ApiError | undefined>(undefined);
  // The values as loaded: a dry run of an unchanged form uses the stored destination, secrets included.
  const loaded = useRef("");
  useEffect(() => {
    if (form.current) loaded.current = JSON.stringify(read(form.current));
  }, []);
  const error = readError ?? props.error;

  const submit = (e: Event) => {
    e.preventDefault();
    const r = read(e.currentTarget as HTMLFormElement);
    setReadError("error" in r ? r.error : undefined);
    if ("values" in r) props.onSubmit(r.values);
  };
  const dryRunTarget = (): DryRunTarget => {
    const r = read(form.current!);
    setReadError("error" in r ? r.error : undefined);
    if ("error" in r) return r;
    if (d && JSON.stringify(r) === loaded.current) {
      return {
        destination: { case: "destinationId", value: d.id },
        note: `The saved destination${d.sharedSecretSet ? ", signed with its secret" : " (no secret set: unsigned)"}.`,
      };
    }
    // The consent settings the form does not edit still decide what is filtered.
    const kept = d ? { consentCategories: d.consentCategories, consentMissing: d.consentMissing } : {};
    return {
      destination: { case: "draft", value: { ...kept, ...destinationInit(r.values) } },
      note: draftNote(r.values, d !== undefined),
    };
  };

  const headerText = d
    ? Object.entries(d.headers)
        .map(([k, v]) => `${k}: ${v}`)
        .join("\n")
    : "";
  const filter = filterView(d?.filter);
  const retry = retryView(d?.retry);
  const batching = batchingView(d?.batching);
  return (
    <div class="form-with-dry-run">
      <form onSubmit={submit} class="destination-form" noValidate ref={form}>
        <FormErrorContext.Provider value={error}>
          <FormError error={error} fields={FORM_FIELDS} />
          {creating ? (
            <Field label="Id" hint="optional; letters, digits, - and _" field="id">
              <input name="id" autoComplete="off" />
            </Field>
          ) : null}
          <Field label="Name" field="name">
            <input name="name" defaultValue={d?.name ?? ""} autoComplete="off" />
          </Field>
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
            <FieldError error={error} field="destination.source_ids" />
          </fieldset>
          <TextArea
            label="Webhook URLs"
            hint={
              <>
                one per line, tried in order; at most 5; <code>{"{{ userId }}"}</code> in the path or query is
                filled in per call
              </>
            }
            name="urls"
            value={d?.urls.join("\n") ?? ""}
          />
          <TextArea
            label="Headers"
            hint='one "Name: value" per line; at most 5; values may hold templates'
            name="headers"
            value={headerText}
          />
          <div class="grid">
            <Select
              label="Signing"
              name="signing"
              options={SIGNING_OPTIONS}
              value={d?.signing || Signing.SEGMENT}
            />
            <label>
              Shared secret{" "}
              <span class="muted">
                {creating ? "(optional)" : d.sharedSecretSet ? "(set; empty keeps it)" : "(not set)"}
                {" (Ed25519: a whsk_ key; generated when none)"}
              </span>
              <input name="secret" type="password" autoComplete="new-password" />
              <FieldError error={error} field="destination.shared_secret" />
            </label>
          </div>
          <fieldset class="shaping">
            <legend>Routing and shaping</legend>
            <p class="muted small-text">
              Expressions are <a href="https://jsonata.org">JSONata</a> on the call's webhook body (
              <code>type</code>, <code>userId</code>, <code>event</code>, <code>properties</code>, …), with{" "}
              <code>$messageId</code>, <code>$sourceId</code> and <code>$destinationId</code>. Empty fields
              keep the defaults.
            </p>
            <fieldset>
              <legend>
                Call types <span class="muted">(none ticked: every type)</span>
              </legend>
              {EVENT_TYPES.map((t) => (
                <label key={t} class="inline">
                  <input
                    type="checkbox"
                    name="filter-type"
                    value={t}
                    defaultChecked={filter?.types?.includes(t) ?? false}
                  />
                  {t}
                </label>
              ))}
              <FieldError error={error} field="destination.filter.types" />
            </fieldset>
            <TextArea
              label="Track events"
              hint="one name per line, exact; empty: every event"
              name="filter-events"
              field="filter.events"
              value={filter?.events?.join("\n") ?? ""}
            />
            <TextArea
              label="Filter expression"
              hint="a call passes when it is truthy"
              name="filter-expression"
              field="filter.expression"
              value={filter?.expression ?? ""}
              placeholder={'properties.plan in ["pro", "team"]'}
            />
            <TextArea
              label="Mapping"
              hint="renders the request body; empty: the default body"
              name="mapping"
              rows={4}
              value={d?.mapping ?? ""}
              placeholder={'{ "id": userId, "event": event, "plan": properties.plan }'}
            />
            <div class="grid">
              <Select
                label="Method"
                name="method"
                options={METHODS.map((m) => [m, methodName(m)])}
                value={d?.method || HttpMethod.POST}
              />
              <TextInput
                label="Retry window"
                hint="e.g. 2h; empty: the server's"
                name="retry-window"
                field="retry.window"
                value={retry?.window ?? ""}
              />
              <TextInput
                label="Retry delays"
                hint="e.g. 30s, 1m, 5m; the last repeats"
                name="retry-delays"
                field="retry.delays"
                value={retry?.delays?.join(", ") ?? ""}
              />
            </div>
            <div class="grid">
              <Select
                label="Delivery mode"
                name="delivery-mode"
                field="delivery_mode"
                options={DELIVERY_MODES}
                value={d?.deliveryMode || DeliveryMode.FAILOVER}
              />
            </div>
            <label class="inline">
              <input type="checkbox" name="batching" defaultChecked={batching !== null} /> Send calls in
              batches (one request, a JSON array)
            </label>
            <FieldError error={error} field="destination.batching" />
            <div class="grid">
              <TextInput
                label="Max calls"
                hint="1 to 1000; empty: 100"
                name="batch-calls"
                field="batching.max_calls"
                numeric
                value={batching?.maxCalls ?? ""}
              />
              <TextInput
                label="Max bytes"
                hint="1024 to 1048576; empty: 512 KiB"
                name="batch-bytes"
                field="batching.max_bytes"
                numeric
                value={batching?.maxBytes ?? ""}
              />
              <TextInput
                label="Max wait"
                hint="e.g. 500ms, 5s; empty: 1s"
                name="batch-wait"
                field="batching.max_wait"
                value={batching?.maxWait ?? ""}
              />
            </div>
          </fieldset>
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
        </FormErrorContext.Provider>
      </form>
      <DryRunPanel target={dryRunTarget} stored={!creating} />
    </div>
  );
}
