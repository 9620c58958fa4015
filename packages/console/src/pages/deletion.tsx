import type { GetDeletionResponse } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { useEffect, useState } from "preact/hooks";
import { admin } from "../api.js";
import { absolute } from "../format.js";
import { Badge, Time } from "../ui/bits.js";
import { IdSearch } from "../ui/id-search.js";
import { ErrorNotice } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

/** While a request is being erased its status is asked again this often (passes every 15 s). */
const REFRESH_MS = 3_000;

/** What erasure removed, per store, in GetDeletion's terms. */
const ERASED: Array<[string, (d: GetDeletionResponse) => bigint, string]> = [
  ["Dead letters", (d) => d.erasedDeadLetters, "dead-letters"],
  ["Attempt records", (d) => d.erasedAttemptRecords, "attempt-records"],
  ["Calls not delivered yet", (d) => d.erasedPendingCalls, "pending-calls"],
  ["Audience and trait memberships", (d) => d.erasedMemberships, "memberships"],
];

/**
 * /deletions and /deletions/:id — a deletion request (`Delete`, `hookpost delete-user`) looked up
 * by its id: which sources' destinations were told, what was erased from Hookpost's stores, and
 * when that was done. What an operator shows when asked whether a request was honoured.
 */
export function DeletionPage({ id }: { id: string }) {
  return (
    <section>
      <h2>Deletion request</h2>
      <IdSearch
        path="/deletions"
        name="request"
        label="Deletion request id (del_…)"
        button="Look up"
        id={id}
      />
      {id ? (
        <Status id={id} key={id} />
      ) : (
        <p class="muted">
          Enter the request id a deletion answered with (<code>hookpost delete-user</code> prints it).
          Requests are kept for DELETION_STATUS_MAX_AGE.
        </p>
      )}
    </section>
  );
}

function Status({ id }: { id: string }) {
  // Asked again until done; a done request does not change any more.
  const [done, setDone] = useState(false);
  const { data, error } = useApi(
    () => admin.getDeletion({ requestId: id }),
    [id],
    done ? undefined : REFRESH_MS,
  );
  useEffect(() => {
    if (data?.doneTime) setDone(true);
  }, [data?.doneTime]);
  if (error && !data) return <ErrorNotice error={error} what={`Deletion request "${id}"`} />;
  if (!data) return <p aria-busy="true">Loading…</p>;
  return (
    <div data-testid="deletion-status" data-done={data.doneTime ? "true" : "false"}>
      <ErrorNotice error={error} what="The status could not be refreshed" />
      <p>
        {data.doneTime ? <Badge kind="ok">done</Badge> : <Badge kind="warn">erasing</Badge>}{" "}
        {data.doneTime
          ? "The user's calls and memberships are erased from Hookpost's stores."
          : "Hookpost is still erasing the user's calls: a pass runs every ERASURE_INTERVAL, and the request is done after one that finds nothing, at least ERASURE_SETTLE after the request."}
      </p>
      <dl class="attempt-detail">
        <dt>Request id</dt>
        <dd>
          <code>{data.requestId}</code>
        </dd>
        <dt>Requested</dt>
        <dd data-testid="request-time">
          {absolute(data.requestTime)} (<Time ts={data.requestTime} />)
        </dd>
        <dt>Done</dt>
        <dd data-testid="done-time">
          {data.doneTime ? (
            <>
              {absolute(data.doneTime)} (<Time ts={data.doneTime} />)
            </>
          ) : (
            "not yet"
          )}
        </dd>
        <dt>Passes</dt>
        <dd data-testid="passes">{data.passes}</dd>
        <dt>Notified sources</dt>
        <dd data-testid="notified-sources">
          {data.notifiedSourceIds.length === 0
            ? "none: no source had received calls for this user"
            : data.notifiedSourceIds.join(", ")}
        </dd>
      </dl>
      <p class="muted small-text">
        The destinations of the notified sources were sent a deletion notice; they delete the user on their
        side.
      </p>
      <h3>Erased from Hookpost's stores</h3>
      <table data-testid="erased">
        <tbody>
          {ERASED.map(([label, count, key]) => (
            <tr key={key} data-erased={key}>
              <th scope="row">{label}</th>
              <td>{String(count(data))}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
