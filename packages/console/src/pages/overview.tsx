import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Destination, DestinationHealth } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { BreakerState, DestinationState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useLayoutEffect, useMemo, useRef } from "preact/hooks";
import { type ApiError, allDestinationHealth, allDestinations, call } from "../api.js";
import { percent } from "../format.js";
import { portal, readOnly } from "../portal.js";
import { Badge, Time } from "../ui/bits.js";
import { DeliveriesChart, type MinuteSeries } from "../ui/chart.js";
import { ErrorNotice } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

const REFRESH_MS = 5_000;

interface OverviewData {
  destinations: Destination[];
  health: Map<string, DestinationHealth> | undefined;
  healthError: ApiError | undefined;
  /** performance.now() when the answers arrived, to time the render. */
  at: number;
}

/** Destinations always; health when the server offers it (the page still works without). */
async function load(): Promise<OverviewData> {
  const [list, health] = await Promise.all([allDestinations(), call(allDestinationHealth)]);
  return {
    destinations: list,
    health: health.ok ? new Map(health.value.map((h) => [h.destinationId, h])) : undefined,
    healthError: health.ok ? undefined : health.error,
    at: performance.now(),
  };
}

export function stateBadge(d: Destination, h: DestinationHealth | undefined) {
  if (!h) return d.enabled === false ? <Badge kind="idle">paused</Badge> : <Badge kind="idle">enabled</Badge>;
  switch (h.state) {
    case DestinationState.FAILING:
      return <Badge kind="bad">failing</Badge>;
    case DestinationState.PAUSED:
      return <Badge kind="idle">paused</Badge>;
    case DestinationState.AUTO_DISABLED:
      return <Badge kind="warn">paused by Hookpost</Badge>;
    default:
      return <Badge kind="ok">delivering</Badge>;
  }
}

/** The circuit breaker over the dispatcher replicas: open holds the destination's calls back. */
export function breakerCell(h: DestinationHealth | undefined) {
  switch (h?.breakerState) {
    case BreakerState.OPEN:
      return (
        <>
          <Badge kind="bad">open</Badge>
          <div class="small-text">
            until <Time ts={h.breakerOpenUntil} />
          </div>
        </>
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

export function Overview() {
  const { data, error } = useApi(load, [], REFRESH_MS);
  const series = useMemo(() => minutes(data?.health?.values() ?? []), [data]);
  const measured = useRef(false);
  useLayoutEffect(() => {
    // How long rendering the table took once the data was there (read by the browser test).
    if (!data || measured.current) return;
    measured.current = true;
    document.documentElement.dataset.overviewRenderMs = (performance.now() - data.at).toFixed(1);
  }, [data]);

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
      <article class="chart-card">
        <h3>Deliveries and failures per minute (last hour)</h3>
        {data?.healthError ? (
          <ErrorNotice error={data.healthError} what="Destination health" />
        ) : (
          <DeliveriesChart data={series} />
        )}
      </article>
      {data ? (
        data.destinations.length === 0 ? (
          <p class="notice notice-info">
            {portal() ? (
              readOnly() ? (
                "No destination yet."
              ) : (
                <>
                  No destination yet. <a href="/console/destinations/new">Create one</a>.
                </>
              )
            ) : (
              <>
                No destination yet. <a href="/console/destinations/new">Create one</a> (after a source, on the{" "}
                <a href="/console/sources">Sources</a> page).
              </>
            )}
          </p>
        ) : (
          <div class="table-scroll">
            <table class="striped" data-testid="overview-table">
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
                {data.destinations.map((d) => {
                  const h = data.health?.get(d.id);
                  const attempts = (h?.deliveries1h ?? 0) + (h?.failures1h ?? 0);
                  return (
                    <tr key={d.id} data-destination={d.id}>
                      <td>
                        <a href={`/console/destinations/${encodeURIComponent(d.id)}`}>{d.name}</a>
                        <div class="muted small-text">{d.id}</div>
                      </td>
                      <td data-col="state">{stateBadge(d, h)}</td>
                      <td>{h ? percent(h.successRate1h, attempts) : "—"}</td>
                      <td>{h ? `${h.deliveries1h} ok, ${h.failures1h} failed` : "—"}</td>
                      <td>{h ? String(h.backlog) : "—"}</td>
                      <td data-col="breaker">{breakerCell(h)}</td>
                      <td data-col="last-failure">
                        {h?.lastFailureTime ? (
                          <>
                            <Time ts={h.lastFailureTime} />
                            <div class="small-text">{h.lastFailureReason}</div>
                          </>
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
        )
      ) : error ? null : (
        <p aria-busy="true">Loading…</p>
      )}
    </section>
  );
}
