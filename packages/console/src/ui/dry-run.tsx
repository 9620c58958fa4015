import type { MessageInitShape } from "@bufbuild/protobuf";
import { filteredText } from "@hookpost/contract/consent";
import type {
  DryRunDestinationRequestSchema,
  DryRunDestinationResponse,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useRef, useState } from "preact/hooks";
import { type ApiError, admin, call } from "../api.js";
import { ErrorNotice } from "./notice.js";

/** What to dry-run, and what its signatures are made with (said beside the result); or why not. */
export type DryRunTarget =
  | { destination: MessageInitShape<typeof DryRunDestinationRequestSchema>["destination"]; note: string }
  | { error: ApiError };

const SAMPLE_CALL = JSON.stringify(
  {
    type: "track",
    userId: "u-1",
    event: "Order Completed",
    properties: { plan: "pro", total: 42.5, currency: "EUR" },
    context: { ip: "203.0.113.7", locale: "en-GB" },
  },
  null,
  2,
);

type Outcome = { answer: DryRunDestinationResponse; note: string } | { error: ApiError };

/**
 * The dry run beside the destination form: the exact request(s) the form's destination would
 * send for one call (AdminService.DryRunDestination), or why it would not. Nothing is sent.
 */
export function DryRunPanel({ target, stored }: { target: () => DryRunTarget; stored: boolean }) {
  const callJson = useRef<HTMLTextAreaElement>(null);
  const [outcome, setOutcome] = useState<Outcome | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  // Counts finished runs, so that a test (or a reader) can tell a new outcome from the last one.
  const [runs, setRuns] = useState(0);
  const finish = (o: Outcome) => {
    setOutcome(o);
    setRuns((n) => n + 1);
  };
  const run = async () => {
    const t = target();
    if ("error" in t) return finish(t);
    setBusy(true);
    const r = await call(() =>
      admin.dryRunDestination({ destination: t.destination, callJson: callJson.current?.value ?? "" }),
    );
    setBusy(false);
    finish(r.ok ? { answer: r.value, note: t.note } : { error: r.error });
  };
  return (
    <aside class="dry-run" data-testid="dry-run" data-runs={runs}>
      <h3>Dry run</h3>
      <p class="muted small-text">
        What this destination would send for one call; nothing is sent or stored.{" "}
        {stored
          ? "With no unsaved changes, the saved destination is used, its signatures included; changes are tried as a draft."
          : "The form is tried as a draft."}
      </p>
      <label>
        Call <span class="muted">(as the Segment HTTP API takes it)</span>
        <textarea name="call-json" ref={callJson} rows={9} defaultValue={SAMPLE_CALL} spellcheck={false} />
      </label>
      <button type="button" class="secondary" onClick={run} aria-busy={busy} disabled={busy}>
        Dry run
      </button>
      {outcome ? <DryRunOutcome outcome={outcome} run={runs} /> : null}
    </aside>
  );
}

function DryRunOutcome({ outcome, run }: { outcome: Outcome; run: number }) {
  if ("error" in outcome) {
    return (
      <div data-testid="dry-run-result" data-outcome="invalid" data-run={run}>
        <ErrorNotice error={outcome.error} />
      </div>
    );
  }
  const { answer, note } = outcome;
  const kind = answer.filteredReason ? "filtered" : answer.error ? "error" : "requests";
  return (
    <div data-testid="dry-run-result" data-outcome={kind} data-run={run}>
      <p class="muted small-text" data-testid="dry-run-note">
        {note}
      </p>
      {answer.filteredReason ? (
        <p class="notice notice-info">{filteredText(answer.filteredReason)}. Nothing would be sent.</p>
      ) : null}
      {answer.error ? <p class="notice notice-error">{answer.error}</p> : null}
      {answer.requests.map((r, i) => (
        <div class="dry-run-request" data-testid="dry-run-request" key={`${i}-${r.url}`}>
          {answer.requests.length > 1 ? (
            <p class="small-text">
              <strong>URL {i + 1}</strong> {i === 0 ? "(tried first)" : "(when the one before fails)"}
            </p>
          ) : null}
          <p class="break">
            <strong data-testid="dry-run-method">{r.method}</strong>{" "}
            <code data-testid="dry-run-url">{r.url}</code>
          </p>
          <pre data-testid="dry-run-headers">
            {Object.entries(r.headers)
              .map(([name, value]) => `${name}: ${value}`)
              .join("\n")}
          </pre>
          {/* The body exactly as sent: the signatures are over these bytes. */}
          <pre data-testid="dry-run-body">{r.body}</pre>
        </div>
      ))}
    </div>
  );
}
