import { filteredText } from "@hookpost/contract/consent";
import type { MessageDelivery } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DeliveryState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { admin, messageHref } from "../api.js";
import { absolute, prettyBody } from "../format.js";
import { AttemptList } from "../ui/attempt-list.js";
import { Badge, Time } from "../ui/bits.js";
import { IdSearch } from "../ui/id-search.js";
import { ErrorNotice } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

function stateBadge(d: MessageDelivery) {
  switch (d.state) {
    case DeliveryState.DELIVERED:
      return <Badge kind="ok">delivered</Badge>;
    case DeliveryState.RETRYING:
      return <Badge kind="warn">retrying</Badge>;
    case DeliveryState.DEAD_LETTER:
      return <Badge kind="bad">dead letter</Badge>;
    case DeliveryState.FILTERED:
      // `filtered: consent ("Advertising" not granted)`: why it was not sent.
      return <Badge kind="idle">{filteredText(d.filterReason)}</Badge>;
    default:
      return <Badge kind="idle">pending</Badge>;
  }
}

/** /messages and /messages/:id — search by message id, then its timeline across destinations. */
export function MessagePage({ id, source }: { id: string; source: string }) {
  return (
    <section>
      <h2>Message</h2>
      <IdSearch path="/messages" name="message" label="Message id" button="Find" id={id} />
      {id ? (
        <Timeline id={id} source={source} />
      ) : (
        <p class="muted">Enter a message id (the Idempotency-Key of a webhook).</p>
      )}
    </section>
  );
}

/** `source`: which source's message, when several sources used the id (the server says so). */
function Timeline({ id, source }: { id: string; source: string }) {
  const { data, error } = useApi(
    () => admin.getMessage({ messageId: id, sourceId: source }),
    [id, source],
    5_000,
  );
  if (error && !data && error.violations.some((v) => v.field === "source_id")) {
    return <SourceChoice id={id} message={error.message} />;
  }
  if (error && !data) return <ErrorNotice error={error} what={`Message "${id}"`} />;
  if (!data) return <p aria-busy="true">Loading…</p>;
  return (
    <div data-testid="message-timeline">
      <p>
        From source <strong>{data.sourceId || "?"}</strong>, received{" "}
        <span title={absolute(data.receivedTime)}>
          <Time ts={data.receivedTime} />
        </span>
        .
      </p>
      {data.noDestination ? (
        <p class="notice notice-info">The source had no destination for this message.</p>
      ) : null}
      {data.deliveries.length > 0 ? (
        <div class="table-scroll">
          <table>
            <thead>
              <tr>
                <th>Destination</th>
                <th>State</th>
                <th>Attempts</th>
                <th>Next attempt</th>
              </tr>
            </thead>
            <tbody>
              {data.deliveries.map((d) => (
                <tr
                  key={`${d.destinationId}~${d.urlIndex ?? ""}`}
                  data-destination={d.destinationId}
                  data-url-index={d.urlIndex}
                >
                  <td>
                    <a href={`/console/destinations/${encodeURIComponent(d.destinationId)}`}>
                      {d.destinationId}
                      {d.urlIndex === undefined ? "" : ` (URL ${d.urlIndex + 1})`}
                    </a>
                  </td>
                  <td>
                    {stateBadge(d)}
                    {d.state === DeliveryState.DEAD_LETTER ? (
                      <a
                        class="small-text"
                        href={`/console/dead-letters?destination=${encodeURIComponent(d.destinationId)}`}
                      >
                        {" "}
                        see dead letters
                      </a>
                    ) : null}
                  </td>
                  <td>{d.attempts}</td>
                  <td>
                    <Time ts={d.nextAttemptTime} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <h3>Timeline</h3>
      {data.attempts.length === 0 ? (
        <p class="muted">No attempt yet.</p>
      ) : (
        <AttemptList attempts={data.attempts} showDestination />
      )}
      {data.body ? (
        <details>
          <summary>Body</summary>
          <pre>{prettyBody(data.body)}</pre>
        </details>
      ) : null}
    </div>
  );
}

/**
 * Several sources used this message id: one link per source that has attempts of it, else the
 * server's message (which names the sources).
 */
function SourceChoice({ id, message }: { id: string; message: string }) {
  const { data } = useApi(() => admin.listAttempts({ messageId: id, pageSize: 100 }), [id]);
  const sources = [...new Set((data?.attempts ?? []).map((a) => a.sourceId))].sort();
  if (data && sources.length === 0) return <div class="notice notice-info">{message}</div>;
  return (
    <div class="notice notice-info" role="alert" data-testid="message-sources">
      Several sources sent message id "{id}". Choose one:{" "}
      {sources.map((s, i) => (
        <span key={s}>
          {i > 0 ? ", " : null}
          <a href={messageHref(id, s)}>{s}</a>
        </span>
      ))}
    </div>
  );
}
