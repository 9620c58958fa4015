import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Attempt } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { AttemptOutcome } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { messageHref } from "../api.js";
import { prettyBody } from "../format.js";
import { Badge, Time } from "./bits.js";

const OUTCOME: Record<number, [string, "ok" | "bad" | "warn"]> = {
  [AttemptOutcome.SUCCESS]: ["delivered", "ok"],
  [AttemptOutcome.REDIRECT]: ["redirect", "bad"],
  [AttemptOutcome.CLIENT_ERROR]: ["client error", "bad"],
  [AttemptOutcome.SERVER_ERROR]: ["server error", "bad"],
  [AttemptOutcome.TIMEOUT]: ["timeout", "bad"],
  [AttemptOutcome.CONNECTION]: ["connection", "bad"],
  [AttemptOutcome.TLS]: ["TLS", "bad"],
  [AttemptOutcome.SSRF]: ["refused (SSRF)", "warn"],
  [AttemptOutcome.INVALID_RESPONSE]: ["invalid response", "bad"],
  [AttemptOutcome.NOT_SENT]: ["not sent", "bad"],
  [AttemptOutcome.FILTERED]: ["filtered", "warn"],
};

export function OutcomeBadge({ a }: { a: Attempt }) {
  const [label, kind] = OUTCOME[a.outcome] ?? ["unknown", "warn"];
  return <Badge kind={kind}>{a.status ? `${a.status} ${label}` : label}</Badge>;
}

/** " (next attempt in …)" after an attempt's reason, when another is scheduled. */
export function NextAttempt({ ts }: { ts: Timestamp | undefined }) {
  if (!ts) return null;
  return (
    <>
      {" "}
      (next attempt <Time ts={ts} />)
    </>
  );
}

/** Attempts as rows that open (native <details>) to their request, response and reason. */
export function AttemptList({
  attempts,
  showDestination,
}: {
  attempts: Attempt[];
  showDestination?: boolean;
}) {
  return (
    <div class="attempts" data-testid="attempts">
      {attempts.map((a) => (
        <details
          key={String(a.sequence)}
          class="attempt"
          data-message={a.messageId}
          data-outcome={AttemptOutcome[a.outcome]}
        >
          <summary>
            <Time ts={a.startTime} /> <OutcomeBadge a={a} /> <span class="muted">#{a.attemptNumber}</span>{" "}
            {showDestination ? <span>{a.destinationId} </span> : null}
            <span class="reason">{a.reason}</span>
          </summary>
          <dl class="attempt-detail">
            <dt>Message</dt>
            <dd>
              <a href={messageHref(a.messageId, a.sourceId)}>{a.messageId}</a>
            </dd>
            <dt>URL</dt>
            <dd class="break">{a.url}</dd>
            <dt>Duration</dt>
            <dd>{a.durationMs} ms</dd>
            <dt>Reason</dt>
            <dd>
              {a.reason || "—"}
              <NextAttempt ts={a.retryable ? a.nextAttemptTime : undefined} />
            </dd>
            <dt>Response</dt>
            <dd>
              {a.responseBody ? (
                <pre data-testid="response-body">{a.responseBody}</pre>
              ) : (
                <span class="muted">(empty)</span>
              )}
            </dd>
            <dt>Request body</dt>
            <dd>
              {a.requestBody ? (
                <pre data-testid="request-body">{prettyBody(a.requestBody)}</pre>
              ) : (
                <span class="muted">(not kept)</span>
              )}
            </dd>
          </dl>
        </details>
      ))}
    </div>
  );
}
