import {
  type Attempt,
  AttemptOutcome,
  ConsentMissing,
  DeliveryMode,
  type Destination,
  Ordering,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { batchingView, filterView, retryView } from "@hookpost/contract/shaping-text";
import { useEffect, useState } from "preact/hooks";
import { type ApiError, admin, allSources, call } from "../api.js";
import { absolute } from "../format.js";
import { readOnly } from "../portal.js";
import { navigate } from "../router.js";
import { AttemptList } from "../ui/attempt-list.js";
import { ShowOnce } from "../ui/bits.js";
import {
  DestinationForm,
  type DestinationValues,
  destinationInit,
  FORM_PATHS,
  methodName,
} from "../ui/destination-form.js";
import { DestinationStatus } from "../ui/destination-status.js";
import { ErrorNotice } from "../ui/notice.js";
import { PublicKeys } from "../ui/public-keys.js";
import { useApi } from "../ui/use-api.js";

const REFRESH_MS = 5_000;
const PAGE = 50;

/** /destinations/new */
export function NewDestination() {
  const sources = useApi(async () => ({ sources: await allSources() }), []);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const create = async (v: DestinationValues) => {
    setBusy(true);
    const r = await call(() => admin.createDestination({ destination: destinationInit(v) }));
    setBusy(false);
    if (r.ok) navigate(`/destinations/${encodeURIComponent(r.value.destination!.id)}`);
    else setError(r.error);
  };
  return (
    <section>
      <h2>New destination</h2>
      <ErrorNotice error={sources.error} what="Sources could not be loaded" />
      {sources.data?.sources.length === 0 ? (
        <p class="notice notice-info" data-testid="no-sources">
          No source yet: a destination receives the calls of the sources it is connected to.{" "}
          <a href="/console/sources">Create a source</a> first.
        </p>
      ) : null}
      {sources.data ? (
        <DestinationForm
          initial={undefined}
          sources={sources.data.sources}
          error={error}
          busy={busy}
          submitLabel="Create destination"
          onSubmit={create}
        />
      ) : null}
    </section>
  );
}

/** /destinations/:id — settings, delivery switch, secret rotation and the attempt log. */
export function DestinationPage({ id }: { id: string }) {
  const loaded = useApi(
    () => Promise.all([admin.getDestination({ id }), allSources().then((sources) => ({ sources }))]),
    [id],
  );
  const [dest, setDest] = useState<Destination | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [actionError, setActionError] = useState<ApiError | undefined>(undefined);
  const [saved, setSaved] = useState("");
  const [busy, setBusy] = useState(false);
  const [secret, setSecret] = useState<string | undefined>(undefined);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [testCall, setTestCall] = useState<
    { messageId: string; attempts: Attempt[] } | "sending" | undefined
  >(undefined);
  useEffect(() => setDest(loaded.data?.[0].destination), [loaded.data]);

  if (loaded.error && !dest) {
    return (
      <ErrorNotice error={loaded.error} what={`Destination "${id}"`}>
        <a href="/console/">Back to the overview</a>, which lists every destination.
      </ErrorNotice>
    );
  }
  if (!dest || !loaded.data) return <p aria-busy="true">Loading…</p>;

  const save = async (v: DestinationValues) => {
    setBusy(true);
    setSaved("");
    const paths = [...FORM_PATHS, ...(v.sharedSecret ? ["shared_secret"] : [])];
    const r = await call(() =>
      admin.updateDestination({ destination: { ...destinationInit(v), id }, updateMask: { paths } }),
    );
    setBusy(false);
    if (r.ok) {
      setDest(r.value.destination);
      setError(undefined);
      setSaved("Saved.");
    } else setError(r.error);
  };
  const setEnabled = async (enabled: boolean) => {
    const r = await call(() =>
      admin.updateDestination({ destination: { id, enabled }, updateMask: { paths: ["enabled"] } }),
    );
    if (r.ok) {
      setDest(r.value.destination);
      setActionError(undefined);
    } else setActionError(r.error);
  };
  const rotate = async () => {
    const r = await call(() => admin.rotateSecret({ destinationId: id }));
    if (r.ok) {
      setDest(r.value.destination);
      setSecret(r.value.secret);
      setActionError(undefined);
    } else setActionError(r.error);
  };
  // One synthetic call through the real delivery path, even while paused (AdminService.SendTestCall).
  const sendTest = async () => {
    setTestCall("sending");
    const r = await call(() => admin.sendTestCall({ destinationId: id, callJson: "" }));
    if (r.ok) {
      setTestCall({ messageId: r.value.messageId, attempts: r.value.attempts });
      setActionError(undefined);
    } else {
      setTestCall(undefined);
      setActionError(r.error);
    }
  };
  const remove = async () => {
    const r = await call(() => admin.deleteDestination({ id }));
    if (r.ok) navigate("/");
    else setActionError(r.error);
  };
  const enabled = dest.enabled !== false;
  const notes = [
    dest.ordering === Ordering.PER_USER
      ? "Ordered per user: each user's calls arrive in the order accepted."
      : "",
    consentText(dest),
    dest.previousSecretExpireTime
      ? `The previous secret signs too until ${absolute(dest.previousSecretExpireTime)}.`
      : "",
  ]
    .map((t) => t.trim())
    .filter(Boolean)
    .join(" ");

  return (
    <section>
      <header class="page-head">
        <h2>
          {dest.name} <span class="muted small-text">{dest.id}</span>
        </h2>
        <div class="actions" hidden={readOnly()}>
          <button
            type="button"
            class={enabled ? "secondary small" : "small"}
            onClick={() => setEnabled(!enabled)}
          >
            {enabled ? "Pause delivery" : "Resume delivery"}
          </button>
          <button type="button" class="secondary small" onClick={rotate}>
            Rotate secret
          </button>
          <button type="button" class="secondary small" onClick={sendTest} disabled={testCall === "sending"}>
            Send test call
          </button>
          {confirmDelete ? (
            <button type="button" class="danger small" onClick={remove}>
              Really delete
            </button>
          ) : (
            <button type="button" class="outline danger small" onClick={() => setConfirmDelete(true)}>
              Delete
            </button>
          )}
        </div>
      </header>
      <DestinationStatus dest={dest} />
      {notes ? <p class="muted">{notes}</p> : null}
      <ErrorNotice error={actionError} />
      {secret ? <ShowOnce label="New shared secret" value={secret} /> : null}
      <TestCallResult result={testCall} />
      <PublicKeys keys={dest.signingPublicKeys} />
      <Shaping d={dest} />
      <details class="settings" open>
        <summary>Settings</summary>
        <fieldset disabled={readOnly()}>
          <DestinationForm
            key={String(dest.updateTime?.seconds ?? "")}
            initial={dest}
            sources={loaded.data[1].sources}
            error={error}
            busy={busy}
            submitLabel="Save settings"
            onSubmit={save}
          />
        </fieldset>
        {saved ? <p class="notice notice-ok">{saved}</p> : null}
      </details>
      <AttemptLog destinationId={id} />
    </section>
  );
}

/** The routing and shaping fields that are set (none: every call, the default body, POST, the server's retries). */
function Shaping({ d }: { d: Destination }) {
  const filter = filterView(d.filter);
  const retry = retryView(d.retry);
  const method = methodName(d.method);
  const batching = batchingView(d.batching);
  const fanOut = d.deliveryMode === DeliveryMode.FAN_OUT;
  if (!filter && !d.mapping && method === "POST" && !retry && !batching && !fanOut) return null;
  return (
    <article class="shaping-summary" data-testid="shaping">
      <h3>Routing and shaping</h3>
      <dl>
        {filter ? (
          <>
            <dt>Filter</dt>
            <dd data-testid="shaping-filter">
              {filter.types ? <p>Call types: {filter.types.join(", ")}</p> : null}
              {filter.events ? (
                <p>Track events: {filter.events.map((e) => JSON.stringify(e)).join(", ")}</p>
              ) : null}
              {filter.expression ? (
                <p>
                  Expression: <code>{filter.expression}</code>
                </p>
              ) : null}
            </dd>
          </>
        ) : null}
        {method !== "POST" ? (
          <>
            <dt>Method</dt>
            <dd data-testid="shaping-method">{method}</dd>
          </>
        ) : null}
        {d.mapping ? (
          <>
            <dt>Mapping</dt>
            <dd>
              <pre data-testid="shaping-mapping">{d.mapping}</pre>
            </dd>
          </>
        ) : null}
        {fanOut ? (
          <>
            <dt>Delivery</dt>
            <dd data-testid="shaping-mode">Fan-out: every URL gets every call, each retried on its own</dd>
          </>
        ) : null}
        {batching ? (
          <>
            <dt>Batching</dt>
            <dd data-testid="shaping-batching">
              up to {batching.maxCalls ?? 100} calls or {batching.maxBytes ?? 512 * 1024} bytes per request,
              waiting at most {batching.maxWait ?? "1s"} for more
            </dd>
          </>
        ) : null}
        {retry ? (
          <>
            <dt>Retries</dt>
            <dd data-testid="shaping-retry">
              {retry.window ? `for ${retry.window}` : "for the server's window"},{" "}
              {retry.delays
                ? `waiting ${retry.delays.join(", ")} (the last repeats)`
                : "with the server's backoff"}
            </dd>
          </>
        ) : null}
      </dl>
    </article>
  );
}

/** The consent requirement in one sentence (empty without one). */
function consentText(d: Destination): string {
  if (d.consentCategories.length === 0) return "";
  const names = d.consentCategories.map((c) => `"${c}"`).join(", ");
  const missing =
    d.consentMissing === ConsentMissing.FILTER
      ? "calls without a consent object are filtered"
      : "calls without a consent object are delivered";
  return ` Requires consent: ${names} (other calls are filtered; ${missing}).`;
}

/** The destination's attempts, newest first, live on the first page; older pages on demand. */
function AttemptLog({ destinationId }: { destinationId: string }) {
  const [failedOnly, setFailedOnly] = useState(false);
  const [older, setOlder] = useState<Attempt[]>([]);
  const [token, setToken] = useState("");
  const first = useApi(
    () => admin.listAttempts({ destinationId, failedOnly, pageSize: PAGE }),
    [destinationId, failedOnly],
    REFRESH_MS,
  );
  useEffect(() => {
    setOlder([]);
    setToken("");
  }, [destinationId, failedOnly]);
  const next = token || (older.length === 0 ? first.data?.nextPageToken : "");
  const more = async () => {
    const r = await call(() =>
      admin.listAttempts({ destinationId, failedOnly, pageSize: PAGE, pageToken: next ?? "" }),
    );
    if (r.ok) {
      setOlder((o) => [...o, ...r.value.attempts]);
      setToken(r.value.nextPageToken);
    }
  };
  const attempts = [...(first.data?.attempts ?? []), ...older];
  return (
    <article>
      <header class="page-head">
        <h3>Attempt log</h3>
        <label class="inline">
          <input
            type="checkbox"
            name="failed-only"
            checked={failedOnly}
            onChange={(e) => setFailedOnly((e.currentTarget as HTMLInputElement).checked)}
          />
          Failed only
        </label>
      </header>
      <ErrorNotice error={first.error} what="Attempt log" />
      {first.data && attempts.length === 0 ? (
        <p class="muted" data-testid="no-attempts">
          {failedOnly
            ? "No failed attempt."
            : "No attempt yet: calls from its sources show here as they are tried; “Send test call” tries one now."}
        </p>
      ) : null}
      <AttemptList attempts={attempts} />
      {next ? (
        <button type="button" class="secondary small" onClick={more}>
          Older attempts
        </button>
      ) : null}
      {first.data ? <p class="muted small-text">Refreshes every {REFRESH_MS / 1000} s.</p> : null}
    </article>
  );
}

/** What the last test call did: its attempt, one line per URL tried. */
function TestCallResult({
  result,
}: {
  result: { messageId: string; attempts: Attempt[] } | "sending" | undefined;
}) {
  if (result === undefined) return null;
  if (result === "sending") return <p aria-busy="true">Sending a test call…</p>;
  const delivered = result.attempts.at(-1)?.outcome === AttemptOutcome.SUCCESS;
  return (
    <article class="test-call" data-testid="test-call">
      <p>
        Test call <code>{result.messageId}</code>: {delivered ? "delivered" : "not delivered"} (never
        retried).
      </p>
      <AttemptList attempts={result.attempts} />
    </article>
  );
}
