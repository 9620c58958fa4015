import { filteredText } from "@hookpost/contract/consent";
import type {
  Attempt,
  GetMessageResponse,
  MessageDelivery,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DeliveryState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { type ApiError, admin, Code, call, messageHref } from "../api.js";
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
        <p class="muted" data-testid="message-prompt">
          Enter a message id: what a webhook carries as <code>Idempotency-Key</code> (and{" "}
          <code>webhook-id</code>), and what the API answered when the call was sent. The page shows where it
          stands at each destination and every attempt, in order.
        </p>
      )}
    </section>
  );
}

/** "track "Order Completed" · user u-1": what the call was, from its body when kept. */
function callSummary(body: string): string {
  try {
    const c = JSON.parse(body) as Record<string, unknown>;
    const what =
      typeof c.event === "string"
        ? `${c.type ?? "track"} "${c.event}"`
        : typeof c.name === "string"
          ? `${c.type} "${c.name}"`
          : String(c.type ?? "call");
    const who =
      typeof c.userId === "string" && c.userId
        ? `user ${c.userId}`
        : typeof c.anonymousId === "string" && c.anonymousId
          ? `anonymous ${c.anonymousId}`
          : "";
    return who ? `${what} · ${who}` : what;
  } catch {
    return "";
  }
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
  if (error && !data) {
    return (
      <ErrorNotice error={error} what={`Message "${id}"`}>
        {error.code === Code.NotFound
          ? "A call sent a moment ago shows here once it is routed (this page asks again every 5 s). A message id is what a webhook carries as Idempotency-Key; a destination's attempt log links each of its calls."
          : null}
      </ErrorNotice>
    );
  }
  if (!data) return <p aria-busy="true">Loading…</p>;
  return <MessageView m={data} error={error} />;
}

/**
 * The names of a message's source and destinations, looked up once per message (not on each
 * refresh, and only those few); an id stays shown when its lookup fails (e.g. deleted since).
 */
function useNames(sourceId: string, destinationIds: string[]) {
  const ids = [sourceId, ...destinationIds];
  const names = useApi(async () => {
    const [source, ...destinations] = await Promise.all([
      call(() => admin.getSource({ id: sourceId })),
      ...destinationIds.map((id) => call(() => admin.getDestination({ id }))),
    ]);
    return new Map(
      [
        source.ok ? source.value.source : undefined,
        ...destinations.map((d) => (d.ok ? d.value.destination : undefined)),
      ]
        .map((r, i) => [ids[i]!, r?.name ?? ""] as const)
        .filter(([, name]) => name !== ""),
    );
  }, [ids.join("\n")]);
  return names.data ?? new Map<string, string>();
}

function MessageView({ m, error }: { m: GetMessageResponse; error: ApiError | undefined }) {
  const names = useNames(
    m.sourceId,
    m.deliveries.map((d) => d.destinationId),
  );
  const sourceName = names.get(m.sourceId);
  const summary = m.body ? callSummary(m.body) : "";
  return (
    <div data-testid="message-timeline">
      <p>
        {summary ? (
          <>
            <strong data-testid="call-summary">{summary}</strong>,{" "}
          </>
        ) : null}
        from source <strong>{sourceName ?? m.sourceId}</strong>
        {sourceName ? <span class="muted small-text"> {m.sourceId}</span> : null}, received{" "}
        <span title={absolute(m.receivedTime)}>
          <Time ts={m.receivedTime} />
        </span>
        .
      </p>
      <ErrorNotice error={error} what="This view may be out of date" />
      {m.noDestination ? (
        <p class="notice notice-info">Its source had no destination: nothing was sent.</p>
      ) : null}
      {m.deliveries.length === 0 && !m.noDestination ? (
        <p class="muted">Not routed to any destination yet.</p>
      ) : null}
      {m.deliveries.map((d) => (
        <DeliveryTimeline
          key={`${d.destinationId}~${d.urlIndex ?? ""}`}
          delivery={d}
          name={names.get(d.destinationId)}
          // FAN_OUT: one timeline per URL, each with that URL's attempts.
          attempts={m.attempts.filter(
            (a) => a.destinationId === d.destinationId && a.urlIndex === d.urlIndex,
          )}
        />
      ))}
      {m.attemptsTruncated ? (
        <p class="muted small-text">
          Only the newest attempts are shown; each destination's attempt log has them all.
        </p>
      ) : null}
      {m.body ? (
        <details>
          <summary>Body</summary>
          <pre>{prettyBody(m.body)}</pre>
        </details>
      ) : null}
    </div>
  );
}

/** One destination's part of the message: where it stands, then each attempt in order. */
function DeliveryTimeline({
  delivery: d,
  name,
  attempts,
}: {
  delivery: MessageDelivery;
  name: string | undefined;
  attempts: Attempt[];
}) {
  const href = `/console/destinations/${encodeURIComponent(d.destinationId)}`;
  return (
    <article
      class="delivery"
      data-destination={d.destinationId}
      data-url-index={d.urlIndex}
      data-state={DeliveryState[d.state]}
    >
      <header class="delivery-head">
        <a href={href}>
          {name ?? d.destinationId}
          {d.urlIndex === undefined ? "" : ` (URL ${d.urlIndex + 1})`}
        </a>
        {name ? <span class="muted small-text">{d.destinationId}</span> : null}
        {stateBadge(d)}
        <span class="muted small-text">{d.attempts === 1 ? "1 attempt" : `${d.attempts} attempts`}</span>
      </header>
      {attempts.length > 0 ? <AttemptList attempts={attempts} /> : null}
      <p class="delivery-end small-text">{deliveryEnd(d, attempts.length)}</p>
    </article>
  );
}

/** The last line of a destination's timeline: what happens next, or how it ended. */
function deliveryEnd(d: MessageDelivery, shown: number) {
  switch (d.state) {
    case DeliveryState.DELIVERED:
      return "Delivered.";
    case DeliveryState.RETRYING:
      return (
        <>
          Next attempt <Time ts={d.nextAttemptTime} />.
        </>
      );
    case DeliveryState.DEAD_LETTER:
      return (
        <>
          Not delivered within its retry window: a dead letter.{" "}
          <a href={`/console/dead-letters?destination=${encodeURIComponent(d.destinationId)}`}>
            See dead letters
          </a>{" "}
          to replay it.
        </>
      );
    case DeliveryState.FILTERED:
      return "Not sent: the destination's filter or consent rules left it out (not a failure).";
    default:
      return shown === 0
        ? "Waiting: not attempted yet. The destination may be paused, held back by its circuit breaker or behind: its page says which."
        : "Waiting for its next attempt.";
  }
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
