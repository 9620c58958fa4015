import { timestampDate, timestampMs } from "@bufbuild/protobuf/wkt";
import type { Destination, DestinationHealth, Source } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { BreakerState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useLayoutEffect, useMemo, useRef } from "preact/hooks";
import { type ApiError, allDestinationHealth, allDestinations, allSources, call } from "../api.js";
import { percent, span } from "../format.js";
import { portal, readOnly } from "../portal.js";
import { destinationStatus, NEEDS_ATTENTION, type Status, worstFirst } from "../status.js";
import { Badge, Time } from "../ui/bits.js";
import { DeliveriesChart, type MinuteSeries } from "../ui/chart.js";
import { WhyList } from "../ui/destination-status.js";
import { ErrorNotice } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

const REFRESH_MS = 5_000;
/** Cards under "Needs attention" at most (a fleet-wide outage would bury the page); the table has them all. */
const ATTENTION_CARDS = 12;

interface OverviewData {
  destinations: Destination[];
  /** Undefined when they could not be read (the page still shows the destinations). */
  sources: Source[] | undefined;
  health: Map<string, DestinationHealth> | undefined;
  healthError: ApiError | undefined;
  /** performance.now() when the answers arrived, to time the render. */
  at: number;
}

/** Destinations always; health when the server offers it (the page still works without). */
async function load(): Promise<OverviewData> {
  const [list, health, sources] = await Promise.all([
    allDestinations(),
    call(allDestinationHealth),
    call(allSources),
  ]);
  return {
    destinations: list,
    sources: sources.ok ? sources.value : undefined,
    health: health.ok ? new Map(health.value.map((h) => [h.destinationId, h])) : undefined,
    healthError: health.ok ? undefined : health.error,
    at: performance.now(),
  };
}

/** The circuit breaker over the dispatcher replicas: open holds the destination's calls back. */
export function breakerCell(h: DestinationHealth | undefined) {
  switch (h?.breakerState) {
    case BreakerState.OPEN:
      return (
        <span>
          <Badge kind="bad">open</Badge>
          <div class="small-text">
            until <Time ts={h.breakerOpenUntil} />
          </div>
        </span>
      );
    case BreakerState.HALF_OPEN:
      return <Badge kind="warn">half-open</Badge>;
    case BreakerState.CLOSED:
      return <span class="muted">closed</span>;
    default:
      return <span class="muted">—</span>;
  }
}

/** Sums every destination's per-minute counts into one series. */
function minutes(health: Iterable<DestinationHealth>): MinuteSeries {
  const byMinute = new Map<number, [number, number]>();
  for (const h of health) {
    for (const m of h.minutes) {
      if (!m.startTime) continue;
      const t = Math.floor(timestampDate(m.startTime).getTime() / 1000);
      const v = byMinute.get(t) ?? [0, 0];
      v[0] += m.delivered;
      v[1] += m.failed;
      byMinute.set(t, v);
    }
  }
  const times = [...byMinute.keys()].sort((a, b) => a - b);
  return {
    times,
    delivered: times.map((t) => byMinute.get(t)![0]),
    failed: times.map((t) => byMinute.get(t)![1]),
  };
}

interface Row {
  d: Destination;
  h: DestinationHealth | undefined;
  status: Status;
  name: string;
}

export function Overview() {
  const { data, error } = useApi(load, [], REFRESH_MS);
  const series = useMemo(() => minutes(data?.health?.values() ?? []), [data]);
  const rows = useMemo(() => {
    if (!data) return [];
    const now = Date.now();
    return data.destinations
      .map((d): Row => {
        const h = data.health?.get(d.id);
        const enabled = d.enabled !== false;
        return {
          d,
          h,
          name: d.name,
          status: destinationStatus({ enabled, disabledReason: d.disabledReason, health: h, now }),
        };
      })
      .sort(worstFirst);
  }, [data]);
  const measured = useRef(false);
  useLayoutEffect(() => {
    // How long rendering the table took once the data was there (read by the browser test).
    if (!data || measured.current) return;
    measured.current = true;
    document.documentElement.dataset.overviewRenderMs = (performance.now() - data.at).toFixed(1);
  }, [data]);
  const attention = rows.filter((r) => NEEDS_ATTENTION.has(r.status.kind));

  return (
    <section>
      <header class="page-head">
        <h2>Overview</h2>
        {readOnly() ? null : (
          <a href="/console/destinations/new" class="button-link">
            New destination
          </a>
        )}
      </header>
      <ErrorNotice error={error} what="Destinations could not be loaded" />
      {!data ? (
        error ? null : (
          <p aria-busy="true">Loading…</p>
        )
      ) : data.destinations.length === 0 ? (
        <EmptyOverview sources={data.sources} />
      ) : (
        <>
          <StatusCounts rows={rows} />
          {data.healthError ? <ErrorNotice error={data.healthError} what="Destination health" /> : null}
          {attention.length > 0 ? (
            <section data-testid="attention" class="attention">
              <h3>Needs attention</h3>
              {attention.slice(0, ATTENTION_CARDS).map((r) => (
                <AttentionCard key={r.d.id} row={r} />
              ))}
              {attention.length > ATTENTION_CARDS ? (
                <p class="muted">
                  And {attention.length - ATTENTION_CARDS} more: the table below lists them all, worst first.
                </p>
              ) : null}
            </section>
          ) : data.health ? (
            <p class="notice notice-ok" data-testid="all-well">
              Nothing needs attention: no destination is failing, behind or paused.
            </p>
          ) : null}
        </>
      )}
      {data && data.destinations.length > 0 ? (
        <>
          <article class="chart-card">
            <h3>Deliveries and failures per minute (last hour)</h3>
            {data.healthError ? (
              <p class="muted">No figures without the destinations' health.</p>
            ) : (
              <>
                <DeliveriesChart data={series} />
                {series.delivered.every((n) => n === 0) && series.failed.every((n) => n === 0) ? (
                  <p class="muted small-text" data-testid="no-attempts">
                    No attempt in the last hour.
                  </p>
                ) : null}
              </>
            )}
          </article>
          <h3>All destinations</h3>
          <DestinationTable rows={rows} />
        </>
      ) : null}
    </section>
  );
}

/** "2 failing · 1 behind · 3 delivering": the whole fleet in one line. */
function StatusCounts({ rows }: { rows: Row[] }) {
  const counts = new Map<string, { n: number; badge: Status["badge"] }>();
  for (const r of rows) {
    const c = counts.get(r.status.label) ?? { n: 0, badge: r.status.badge };
    c.n++;
    counts.set(r.status.label, c);
  }
  return (
    <p class="status-counts" data-testid="status-counts">
      {[...counts].map(([label, c]) => (
        <span key={label} class="status-count">
          <Badge kind={c.badge}>{`${c.n} ${label}`}</Badge>
        </span>
      ))}
    </p>
  );
}

/** One destination that needs a person: where it stands and why. */
function AttentionCard({ row }: { row: Row }) {
  const { d, status } = row;
  return (
    <article class={`attention-card status-${status.kind}`} data-attention={d.id} data-status={status.kind}>
      <header>
        <a href={`/console/destinations/${encodeURIComponent(d.id)}`}>{d.name}</a>{" "}
        <Badge kind={status.badge}>{status.label}</Badge> <span class="muted small-text">{d.id}</span>
      </header>
      <p class="headline">{status.headline}</p>
      <WhyList why={status.why} />
    </article>
  );
}

/** No destination yet: what to do first (a source, then a destination). */
function EmptyOverview({ sources }: { sources: Source[] | undefined }) {
  // A portal link sees its own source only: no Sources page to send it to.
  if (portal()) {
    return (
      <article class="empty" data-testid="empty-overview">
        <h3>No destination yet</h3>
        {readOnly() ? null : (
          <p>
            <a href="/console/destinations/new">Create one</a>: the webhook URL this source's calls are
            delivered to.
          </p>
        )}
      </article>
    );
  }
  return (
    <article class="empty" data-testid="empty-overview">
      <h3>No destination yet</h3>
      {sources?.length === 0 ? (
        <ol>
          <li>
            Create a source on the <a href="/console/sources">Sources</a> page: your services send calls with
            its write key.
          </li>
          <li>
            Then <a href="/console/destinations/new">create a destination</a>: the webhook URL that source's
            calls are delivered to.
          </li>
        </ol>
      ) : (
        <p>
          <a href="/console/destinations/new">Create one</a>: the webhook URL your sources' calls are
          delivered to. Its health shows here once calls flow.
        </p>
      )}
    </article>
  );
}

/** Every destination, worst first; on a phone each row is a card. */
function DestinationTable({ rows }: { rows: Row[] }) {
  return (
    <div class="table-scroll">
      <table class="striped stack" data-testid="overview-table">
        <thead>
          <tr>
            <th>Destination</th>
            <th>State</th>
            <th>Success (1 h)</th>
            <th>Deliveries (1 h)</th>
            <th>Backlog</th>
            <th>Breaker</th>
            <th>Last failure</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ d, h, status }) => {
            const attempts = (h?.deliveries1h ?? 0) + (h?.failures1h ?? 0);
            return (
              <tr key={d.id} data-destination={d.id} data-status={status.kind}>
                <td data-label="Destination">
                  <span>
                    <a href={`/console/destinations/${encodeURIComponent(d.id)}`}>{d.name}</a>
                    <div class="muted small-text">{d.id}</div>
                  </span>
                </td>
                <td data-col="state" data-label="State">
                  <Badge kind={status.badge}>{status.label}</Badge>
                </td>
                <td data-label="Success (1 h)">{h ? percent(h.successRate1h, attempts) : "—"}</td>
                <td data-label="Deliveries (1 h)">
                  {h ? `${h.deliveries1h} ok, ${h.failures1h} failed` : "—"}
                </td>
                <td data-col="backlog" data-label="Backlog">
                  {h ? (
                    <span>
                      {String(h.backlog)}
                      {h.backlog > 0n && h.oldestWaitingTime ? (
                        <div class="small-text">
                          oldest {span(Date.now() - timestampMs(h.oldestWaitingTime))}
                        </div>
                      ) : null}
                    </span>
                  ) : (
                    "—"
                  )}
                </td>
                <td data-col="breaker" data-label="Breaker">
                  {breakerCell(h)}
                </td>
                <td data-col="last-failure" data-label="Last failure">
                  {h?.lastFailureTime ? (
                    <span>
                      <Time ts={h.lastFailureTime} />
                      <div class="small-text">{h.lastFailureReason}</div>
                    </span>
                  ) : (
                    <span class="muted">—</span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
