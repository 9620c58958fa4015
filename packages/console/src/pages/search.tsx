import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  CALL_TYPES,
  httpStatusFilterOf,
  LOG_STATUS_NAMES,
  logStatusOf,
} from "@hookpost/contract/attempt-search";
import {
  type GetAttemptLogInfoResponse,
  type LogEntry,
  LogStatus,
  type SearchAttemptsRequestSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useEffect, useState } from "preact/hooks";
import { type ApiError, admin, Code, call, messageHref } from "../api.js";
import { absolute } from "../format.js";
import { portal } from "../portal.js";
import { navigate } from "../router.js";
import { NextAttempt } from "../ui/attempt-list.js";
import { Badge, Time } from "../ui/bits.js";
import { ErrorNotice, FieldError, FormError } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

const PAGE = 50;

/** The filters as the page's URL keeps them (`/search?status=failed&since=1h`), so a search can be shared. */
const FIELDS = [
  "destination",
  "source",
  "status",
  "http",
  "since",
  "until",
  "type",
  "event",
  "user",
  "message",
];

const STATUS_BADGE: Record<number, ["ok" | "bad" | "warn" | "idle", string]> = {
  [LogStatus.DELIVERED]: ["ok", "delivered"],
  [LogStatus.FAILED]: ["bad", "failed"],
  [LogStatus.FILTERED]: ["idle", "filtered"],
  [LogStatus.DEAD_LETTERED]: ["bad", "dead-lettered"],
};

/** `since`/`until` in the URL: a duration ago (`1h`) or a date-time. */
const AGO: Record<string, number> = { "15m": 900_000, "1h": 3_600_000, "24h": 86_400_000, "3d": 259_200_000 };
const SINCE_CHOICES: Record<string, string> = {
  "15m": "15 minutes ago",
  "1h": "1 hour ago",
  "24h": "24 hours ago",
  "3d": "3 days ago",
};

function pointOf(text: string): Date | undefined {
  if (text === "") return undefined;
  if (AGO[text] !== undefined) return new Date(Date.now() - AGO[text]!);
  const d = new Date(text);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** The request for the filters in the URL; what cannot be read is left for the server to refuse. */
function requestOf(q: URLSearchParams): MessageInitShape<typeof SearchAttemptsRequestSchema> {
  const get = (k: string) => q.get(k)?.trim() ?? "";
  const statuses = get("status")
    .split(",")
    .filter(Boolean)
    .map((s) => logStatusOf(s) ?? 99);
  const http = get("http") ? (httpStatusFilterOf(get("http")) ?? { httpStatus: -1 }) : {};
  const since = pointOf(get("since"));
  const until = pointOf(get("until"));
  return {
    destinationId: get("destination"),
    sourceId: get("source"),
    statuses,
    ...http,
    ...(since ? { since: timestampFromDate(since) } : {}),
    ...(until ? { until: timestampFromDate(until) } : {}),
    callType: get("type"),
    event: get("event"),
    userId: get("user"),
    messageId: get("message"),
    pageSize: PAGE,
  };
}

/**
 * /search — the attempt log searched by destination, source, status, HTTP status, time, call type,
 * event name, user and message, newest first (SearchAttempts); the log's retention above it.
 */
export function SearchPage({ query }: { query: URLSearchParams }) {
  const key = FIELDS.map((f) => `${f}=${query.get(f) ?? ""}`).join("&");
  return (
    <section>
      <header class="page-head">
        <h2>Search the attempt log</h2>
      </header>
      <Retention />
      <Filters query={query} key={`form:${key}`} />
      <Results query={query} key={`results:${key}`} />
    </section>
  );
}

function bytes(n: bigint): string {
  let v = Number(n);
  for (const unit of ["bytes", "KiB", "MiB", "GiB", "TiB"]) {
    if (v < 1024 || unit === "TiB") return unit === "bytes" ? `${v} bytes` : `${v.toFixed(1)} ${unit}`;
    v /= 1024;
  }
  return `${v}`;
}

function age(info: GetAttemptLogInfoResponse): string {
  const ms = info.maxAge ? durationMs(info.maxAge) : 0;
  if (ms === 0) return "without an age limit";
  const days = ms / 86_400_000;
  return days >= 1 && Number.isInteger(days) ? `${days} days` : `${Math.round(ms / 3_600_000)} hours`;
}

/** How far back a search reaches: the log's limits (age and bytes) and what it holds now. */
function Retention() {
  // The whole log's figures are the operator's (a portal link is refused them).
  return portal() ? null : <RetentionLine />;
}

function RetentionLine() {
  const { data, error } = useApi(() => admin.getAttemptLogInfo({}), [], 30_000);
  if (error && !data)
    return <ErrorNotice error={error} what="The attempt log's retention could not be loaded" />;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const full = data.maxBytes > 0n ? Number(data.bytes) / Number(data.maxBytes) : 0;
  return (
    <p class="muted small-text" data-testid="retention">
      The attempt log keeps records <strong data-testid="retention-age">{age(data)}</strong> and at most{" "}
      <strong data-testid="retention-bytes">
        {data.maxBytes > 0n ? bytes(data.maxBytes) : "no byte limit"}
      </strong>{" "}
      (ATTEMPT_LOG_MAX_AGE, ATTEMPT_LOG_MAX_BYTES; the oldest go first). It holds {bytes(data.bytes)} (
      {(full * 100).toFixed(full < 0.1 ? 1 : 0)} %) in {String(data.records)} records
      {data.oldestTime ? (
        <>
          , from <span title={absolute(data.oldestTime)}>{absolute(data.oldestTime)}</span>
        </>
      ) : null}
      : a search reaches no further back.
      {data.unindexedRecords > 0n ? ` ${data.unindexedRecords} newest records are not indexed yet.` : ""}
    </p>
  );
}

/** The filter form; submitting it puts the filters in the URL (the results follow the URL). */
function Filters({ query }: { query: URLSearchParams }) {
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const statuses = new Set((query.get("status") ?? "").split(",").filter(Boolean));
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const q = new URLSearchParams();
    const picked = LOG_STATUS_NAMES.filter((s) => form.get(`status-${s}`) === "on");
    if (picked.length > 0) q.set("status", picked.join(","));
    for (const f of FIELDS) {
      if (f === "status") continue;
      const v = String(form.get(f) ?? "").trim();
      if (v) q.set(f, v);
    }
    // A date and time given wins over "since 1 hour ago".
    const from = String(form.get("since-at") ?? "").trim();
    if (from) q.set("since", from);
    const http = q.get("http");
    if (http && !httpStatusFilterOf(http)) {
      setError({
        code: Code.InvalidArgument,
        message: "invalid HTTP status",
        violations: [{ field: "http", description: "an HTTP status (500) or a class (5xx)" }],
      });
      return;
    }
    setError(undefined);
    const text = q.toString();
    navigate(text ? `/search?${text}` : "/search");
  };
  const since = query.get("since") ?? "";
  return (
    <form class="search-filters" onSubmit={submit} data-testid="search-filters">
      <FormError error={error} fields={["http"]} />
      <div class="grid filters-grid">
        <label>
          Destination
          <input name="destination" placeholder="any" defaultValue={query.get("destination") ?? ""} />
        </label>
        <label>
          Source
          <input name="source" placeholder="any" defaultValue={query.get("source") ?? ""} />
        </label>
        <label>
          HTTP status
          <input name="http" placeholder="500 or 5xx" defaultValue={query.get("http") ?? ""} />
          <FieldError error={error} field="http" />
        </label>
        <label>
          Call type
          <select name="type">
            <option value="">any</option>
            {CALL_TYPES.map((t) => (
              <option key={t} value={t} selected={query.get("type") === t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label>
          Event name
          <input name="event" placeholder="Order Completed" defaultValue={query.get("event") ?? ""} />
        </label>
        <label>
          User id
          <input name="user" placeholder="any" defaultValue={query.get("user") ?? ""} />
        </label>
        <label>
          Message id
          <input name="message" placeholder="any" defaultValue={query.get("message") ?? ""} />
        </label>
        <label>
          Since
          <select name="since">
            <option value="">any time</option>
            {Object.entries(SINCE_CHOICES).map(([v, label]) => (
              <option key={v} value={v} selected={since === v}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label>
          From
          <input
            name="since-at"
            type="datetime-local"
            defaultValue={since && AGO[since] === undefined ? localInput(since) : ""}
          />
        </label>
        <label>
          Until
          <input
            name="until"
            type="datetime-local"
            defaultValue={query.get("until") ? localInput(query.get("until")!) : ""}
          />
        </label>
      </div>
      <fieldset class="statuses">
        <legend>Status</legend>
        {LOG_STATUS_NAMES.map((s) => (
          <label key={s}>
            <input type="checkbox" name={`status-${s}`} defaultChecked={statuses.has(s)} /> {s}
          </label>
        ))}
      </fieldset>
      <div class="actions">
        <button type="submit">Search</button>{" "}
        <a href="/console/search" class="secondary">
          Clear
        </a>
      </div>
    </form>
  );
}

/** A URL's `until` for a datetime-local input (local time, minutes). */
function localInput(text: string): string {
  const d = pointOf(text);
  if (!d) return "";
  const off = d.getTimezoneOffset() * 60_000;
  return new Date(d.getTime() - off).toISOString().slice(0, 16);
}

/**
 * A page answers within a second with what it found (old records take long to read) and its token
 * continues: short pages are followed at once until a page is full, a few times at most.
 */
const AUTO_PAGES = 10;

function Results({ query }: { query: URLSearchParams }) {
  const req = requestOf(query);
  const first = useApi(() => admin.searchAttempts(req), []);
  const [more, setMore] = useState<{ entries: LogEntry[]; next: string; pages: number } | undefined>(
    undefined,
  );
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const entries = [...(first.data?.entries ?? []), ...(more?.entries ?? [])];
  const next = more ? more.next : (first.data?.nextPageToken ?? "");
  const filtered = FIELDS.some((f) => query.get(f));
  const pages = 1 + (more?.pages ?? 0);
  // Which full page of PAGE the list is on: "Older entries" asks for the next one.
  const wanted = Math.max(PAGE, Math.ceil(entries.length / PAGE) * PAGE);

  const loadOlder = async (auto: boolean) => {
    setBusy(true);
    const size = auto ? wanted - entries.length : PAGE;
    const r = await call(() => admin.searchAttempts({ ...req, pageSize: size, pageToken: next }));
    setBusy(false);
    if (!r.ok) {
      setError(r.error);
      return;
    }
    setError(undefined);
    setMore({
      entries: [...(more?.entries ?? []), ...r.value.entries],
      next: r.value.nextPageToken,
      pages: (auto ? (more?.pages ?? 0) : 0) + 1,
    });
  };
  useEffect(() => {
    if (first.data && next && !busy && !error && entries.length < wanted && pages < AUTO_PAGES) {
      void loadOlder(true);
    }
  }, [first.data, next, busy]);

  if (first.error && !first.data) return <ErrorNotice error={first.error} what="The search failed" />;
  if (!first.data) return <p aria-busy="true">Searching…</p>;
  return (
    <div data-testid="search-results">
      {first.data.unindexedRecords > 0n ? (
        <p class="notice notice-info">
          The {String(first.data.unindexedRecords)} newest records are not indexed yet on this server (it is
          catching up after a start): they were not searched.
        </p>
      ) : null}
      {entries.length === 0 && !next ? (
        <p class="muted" data-testid="search-empty">
          {filtered ? "Nothing in the attempt log matches these filters." : "The attempt log is empty."}
        </p>
      ) : null}
      <div class="attempts">
        {entries.map((e) => (
          <Row key={`${e.sequence}:${e.destinationId}`} e={e} />
        ))}
      </div>
      <ErrorNotice error={error} what="Older entries could not be loaded" />
      {next ? (
        <button
          type="button"
          class="secondary"
          onClick={() => loadOlder(false)}
          aria-busy={busy}
          disabled={busy}
        >
          {entries.length === 0 ? "Search further back" : "Older entries"}
        </button>
      ) : null}
    </div>
  );
}

function Row({ e }: { e: LogEntry }) {
  const [kind, label] = STATUS_BADGE[e.status] ?? ["warn", "unknown"];
  const a = e.attempt;
  return (
    <details class="attempt search-entry" data-status={LogStatus[e.status]} data-message={e.messageId}>
      <summary>
        <Time ts={e.time} /> <Badge kind={kind}>{e.httpStatus ? `${e.httpStatus} ${label}` : label}</Badge>{" "}
        <a href={`/console/destinations/${encodeURIComponent(e.destinationId)}`}>{e.destinationId}</a>{" "}
        <span class="muted">
          {e.callType || "?"}
          {e.event ? ` "${e.event}"` : ""}
        </span>{" "}
        <span class="reason">{e.reason}</span>
      </summary>
      <dl class="attempt-detail">
        <dt>Message</dt>
        <dd>
          <a href={messageHref(e.messageId, e.sourceId)}>{e.messageId}</a> from source {e.sourceId}
        </dd>
        <dt>When</dt>
        <dd>{absolute(e.time)}</dd>
        {a ? (
          <>
            <dt>URL</dt>
            <dd class="break">{a.url}</dd>
            <dt>Attempt</dt>
            <dd>
              #{a.attemptNumber}, {a.durationMs} ms
              <NextAttempt ts={a.nextAttemptTime} />
            </dd>
            <dt>Response</dt>
            <dd>{a.responseBody ? <pre>{a.responseBody}</pre> : <span class="muted">(empty)</span>}</dd>
          </>
        ) : null}
        {e.deadLetterSequence ? (
          <>
            <dt>Dead letter</dt>
            <dd>
              <a href={`/console/dead-letters?destination=${encodeURIComponent(e.destinationId)}`}>
                #{String(e.deadLetterSequence)}
              </a>
            </dd>
          </>
        ) : null}
      </dl>
    </details>
  );
}
