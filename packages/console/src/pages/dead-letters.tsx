import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DeadLetter } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useState } from "preact/hooks";
import { type ApiError, admin, allDestinations, Code, call, messageHref } from "../api.js";
import { readOnly } from "../portal.js";
import { navigate } from "../router.js";
import { Time } from "../ui/bits.js";
import { ErrorNotice, FieldError } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

const PAGE = 500;

/**
 * Dead letters of one destination, or of all. A server that still needs destination_id to
 * list gets asked once per destination.
 */
async function listLetters(destinationId: string): Promise<DeadLetter[]> {
  const r = await call(() => admin.listDeadLetters({ destinationId, pageSize: PAGE }));
  if (r.ok) return r.value.deadLetters;
  const needsId =
    r.error.code === Code.InvalidArgument && r.error.violations.some((v) => v.field === "destination_id");
  if (destinationId !== "" || !needsId) throw r.error;
  const destinations = await allDestinations();
  const lists = await Promise.all(
    destinations.map((d) =>
      admin.listDeadLetters({ destinationId: d.id, pageSize: PAGE }).then((x) => x.deadLetters),
    ),
  );
  return lists.flat().sort((a, b) => Number(b.deadTime?.seconds ?? 0n) - Number(a.deadTime?.seconds ?? 0n));
}

const key = (d: DeadLetter) => `${d.destinationId}:${d.sequence}`;

/** /dead-letters — list across destinations, replay a selection, replay all in a time range. */
export function DeadLettersPage({ destination }: { destination: string }) {
  const destinations = useApi(async () => ({ destinations: await allDestinations() }), []);
  const letters = useApi(() => listLetters(destination), [destination]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [result, setResult] = useState("");
  const [error, setError] = useState<ApiError | undefined>(undefined);

  const toggle = (k: string, on: boolean) =>
    setSelected((s) => {
      const n = new Set(s);
      if (on) n.add(k);
      else n.delete(k);
      return n;
    });

  const replaySelected = async () => {
    const byDest = new Map<string, bigint[]>();
    for (const d of letters.data ?? []) {
      if (selected.has(key(d)))
        byDest.set(d.destinationId, [...(byDest.get(d.destinationId) ?? []), d.sequence]);
    }
    let replayed = 0;
    for (const [destinationId, sequences] of byDest) {
      const r = await call(() => admin.replayDeadLetters({ destinationId, sequences }));
      if (!r.ok) {
        setError(r.error);
        return;
      }
      replayed += r.value.replayed;
    }
    setError(undefined);
    setSelected(new Set());
    setResult(`Replayed ${replayed} dead letter${replayed === 1 ? "" : "s"}.`);
    letters.reload();
  };

  const list = letters.data ?? [];
  return (
    <section>
      <header class="page-head">
        <h2>Dead letters</h2>
        <label class="inline">
          Destination{" "}
          <select
            name="filter"
            value={destination}
            onChange={(e) => {
              const v = (e.currentTarget as HTMLSelectElement).value;
              navigate(v ? `/dead-letters?destination=${encodeURIComponent(v)}` : "/dead-letters");
            }}
          >
            <option value="">All destinations</option>
            {destinations.data?.destinations.map((d) => (
              <option key={d.id} value={d.id}>
                {d.name} ({d.id})
              </option>
            ))}
          </select>
        </label>
      </header>
      <ErrorNotice error={letters.error} what="Dead letters could not be loaded" />
      {result ? (
        <p class="notice notice-ok" data-testid="replay-result">
          {result}
        </p>
      ) : null}
      <ErrorNotice error={error} what="Replay failed" />
      {letters.data && list.length === 0 ? (
        <p class="muted" data-testid="empty">
          No dead letters{destination ? ` for ${destination}` : ""}: every call was delivered, left out by a
          filter, or is still being retried.
        </p>
      ) : null}
      {list.length > 0 ? (
        <>
          <div class="table-scroll">
            <table data-testid="dead-letters">
              <thead>
                <tr>
                  <th>
                    <input
                      type="checkbox"
                      aria-label="Select all"
                      checked={selected.size === list.length}
                      onChange={(e) =>
                        setSelected(
                          (e.currentTarget as HTMLInputElement).checked ? new Set(list.map(key)) : new Set(),
                        )
                      }
                    />
                  </th>
                  <th>Dead since</th>
                  <th>Destination</th>
                  <th>Message</th>
                  <th>Attempts</th>
                  <th>Reason</th>
                </tr>
              </thead>
              <tbody>
                {list.map((d) => (
                  <tr key={key(d)} data-message={d.messageId}>
                    <td>
                      <input
                        type="checkbox"
                        aria-label={`Select ${d.messageId}`}
                        checked={selected.has(key(d))}
                        onChange={(e) => toggle(key(d), (e.currentTarget as HTMLInputElement).checked)}
                      />
                    </td>
                    <td>
                      <Time ts={d.deadTime} />
                    </td>
                    <td>{d.destinationId}</td>
                    <td class="break">
                      <a href={messageHref(d.messageId, d.sourceId)}>{d.messageId}</a>
                    </td>
                    <td>{d.attempts}</td>
                    <td>{d.reason}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {readOnly() ? null : (
            <button type="button" disabled={selected.size === 0} onClick={replaySelected}>
              Replay selected ({selected.size})
            </button>
          )}
        </>
      ) : null}
      {readOnly() ? null : (
        <ReplayRange
          destinations={destinations.data?.destinations ?? []}
          initial={destination}
          onDone={(n) => {
            setResult(`Replayed ${n} dead letter${n === 1 ? "" : "s"}.`);
            letters.reload();
          }}
        />
      )}
    </section>
  );
}

/** Replays every dead letter of a destination that died within a time range (both ends optional). */
function ReplayRange(props: {
  destinations: Array<{ id: string; name: string }>;
  initial: string;
  onDone: (n: number) => void;
}) {
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const at = (k: string) => {
      const v = String(f.get(k) ?? "");
      return v ? timestampFromDate(new Date(v)) : undefined;
    };
    const since = at("since");
    const until = at("until");
    const r = await call(() =>
      admin.replayDeadLetters({
        destinationId: String(f.get("destination") ?? ""),
        ...(since ? { since } : {}),
        ...(until ? { until } : {}),
      }),
    );
    if (r.ok) {
      setError(undefined);
      props.onDone(r.value.replayed);
    } else setError(r.error);
  };
  return (
    <article>
      <h3>Replay all in a time range</h3>
      <form onSubmit={submit} data-testid="replay-range" noValidate>
        <div class="grid">
          <label>
            Destination
            <select name="destination" defaultValue={props.initial} key={props.initial}>
              <option value="">Choose…</option>
              {props.destinations.map((d) => (
                <option key={d.id} value={d.id}>
                  {d.name} ({d.id})
                </option>
              ))}
            </select>
            <FieldError error={error} field="destination_id" />
          </label>
          <label>
            Dead since
            <input type="datetime-local" name="since" step="1" />
            <FieldError error={error} field="since" />
          </label>
          <label>
            Dead before
            <input type="datetime-local" name="until" step="1" />
            <FieldError error={error} field="until" />
          </label>
        </div>
        {error && error.violations.length === 0 ? <ErrorNotice error={error} /> : null}
        <button type="submit" class="secondary">
          Replay range
        </button>
      </form>
    </article>
  );
}
