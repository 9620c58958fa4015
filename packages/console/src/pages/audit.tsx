import type { AuditChange, AuditRecord } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { ActorKind, AuditOutcome } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useState } from "preact/hooks";
import { type ApiError, admin, call } from "../api.js";
import { prettyBody } from "../format.js";
import { navigate } from "../router.js";
import { Badge, Time } from "../ui/bits.js";
import { ErrorNotice } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

const PAGE = 100;

const OUTCOME: Record<number, [string, "ok" | "bad" | "warn"]> = {
  [AuditOutcome.SUCCEEDED]: ["succeeded", "ok"],
  [AuditOutcome.FAILED]: ["failed", "bad"],
  [AuditOutcome.UNKNOWN]: ["outcome unknown", "warn"],
};

function actor(r: AuditRecord): string {
  if (r.actorKind === ActorKind.ADMIN_TOKEN) return `admin ${r.actorId}`;
  if (r.actorKind === ActorKind.PORTAL_LINK) return `portal link ${r.actorId}`;
  return r.actorId || "unknown";
}

/** "created", "deleted", "changed urls, headers" (another resource than the call's is named). */
function changeText(r: AuditRecord, c: AuditChange): string {
  const what =
    c.beforeJson === ""
      ? "created"
      : c.afterJson === ""
        ? "deleted"
        : c.changedFields.length > 0
          ? `changed ${c.changedFields.join(", ")}`
          : "unchanged";
  return c.resourceId === r.resourceId ? what : `${c.resourceType} ${c.resourceId}: ${what}`;
}

/**
 * /audit — who changed what through the admin API, newest first; each row opens to the request
 * and every change before → after (secrets and header values redacted by the server). Read-only:
 * the API offers no way to change a record.
 */
export function AuditPage({ resource }: { resource: string }) {
  const first = useApi(() => admin.listAuditRecords({ resourceId: resource, pageSize: PAGE }), [resource]);
  // Older pages, loaded with "Older records" (the page is keyed by the filter, so they reset with it).
  const [more, setMore] = useState<{ records: AuditRecord[]; next: string } | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const records = [...(first.data?.records ?? []), ...(more?.records ?? [])];
  const next = more ? more.next : (first.data?.nextPageToken ?? "");

  const loadOlder = async () => {
    const r = await call(() =>
      admin.listAuditRecords({ resourceId: resource, pageSize: PAGE, pageToken: next }),
    );
    if (!r.ok) {
      setError(r.error);
      return;
    }
    setError(undefined);
    setMore({ records: [...(more?.records ?? []), ...r.value.records], next: r.value.nextPageToken });
  };

  const filter = (e: Event) => {
    e.preventDefault();
    const v = String(new FormData(e.currentTarget as HTMLFormElement).get("resource") ?? "").trim();
    navigate(v ? `/audit?resource=${encodeURIComponent(v)}` : "/audit");
  };

  return (
    <section>
      <header class="page-head">
        <h2>Audit log</h2>
        <form class="search" onSubmit={filter} data-testid="audit-filter">
          <input
            name="resource"
            placeholder="Source or destination id"
            defaultValue={resource}
            key={resource}
          />
          <button type="submit" class="secondary">
            Filter
          </button>
        </form>
      </header>
      <p class="muted small-text">
        Every change made through the admin API (console, CLI, scripts), newest first. Secrets, keys and
        header values are never shown. Records cannot be edited and are kept for AUDIT_LOG_MAX_AGE.
      </p>
      <ErrorNotice error={first.error} what="The audit log could not be loaded" />
      <ErrorNotice error={error} what="Older records could not be loaded" />
      {first.data && records.length === 0 ? (
        <p class="muted">{resource ? `No audit records for ${resource}.` : "No audit records yet."}</p>
      ) : null}
      <div class="attempts" data-testid="audit-records">
        {records.map((r) => (
          <details
            key={r.id}
            class="attempt audit-record"
            data-action={r.action}
            data-resource={r.resourceId}
          >
            <summary>
              <Time ts={r.time} /> <OutcomeBadge r={r} /> <span class="muted">{actor(r)}</span>{" "}
              <strong>{r.action}</strong> {r.resourceType} {r.resourceId}{" "}
              <span class="reason">
                {r.outcome === AuditOutcome.FAILED
                  ? r.error
                  : r.changes.map((c) => changeText(r, c)).join("; ")}
              </span>
            </summary>
            <dl class="attempt-detail">
              <dt>Audit id</dt>
              <dd>{r.id}</dd>
              <dt>Revision</dt>
              <dd>{r.revision === 0n ? "—" : String(r.revision)}</dd>
              <dt>Request</dt>
              <dd>
                <pre>{prettyBody(r.requestJson)}</pre>
              </dd>
              {r.resultJson ? (
                <>
                  <dt>Answer</dt>
                  <dd>
                    <pre>{prettyBody(r.resultJson)}</pre>
                  </dd>
                </>
              ) : null}
              {r.changes.map((c) => (
                <Change key={`${c.resourceType}:${c.resourceId}`} c={c} />
              ))}
            </dl>
          </details>
        ))}
      </div>
      {next ? (
        <button type="button" class="secondary" onClick={loadOlder}>
          Older records
        </button>
      ) : null}
    </section>
  );
}

function OutcomeBadge({ r }: { r: AuditRecord }) {
  const [label, kind] = OUTCOME[r.outcome] ?? ["unknown", "warn"];
  return <Badge kind={kind}>{label}</Badge>;
}

function Change({ c }: { c: AuditChange }) {
  return (
    <>
      <dt>
        {c.resourceType} {c.resourceId}
      </dt>
      <dd>
        {c.changedFields.length > 0 ? <p class="small-text">Changed: {c.changedFields.join(", ")}</p> : null}
        <div class="grid">
          <div>
            <span class="muted small-text">Before</span>
            <pre data-testid="before">{c.beforeJson ? prettyBody(c.beforeJson) : "(did not exist)"}</pre>
          </div>
          <div>
            <span class="muted small-text">After</span>
            <pre data-testid="after">{c.afterJson ? prettyBody(c.afterJson) : "(deleted)"}</pre>
          </div>
        </div>
      </dd>
    </>
  );
}
