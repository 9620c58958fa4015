import { createHash, randomBytes } from "node:crypto";
import { Code, HookpostError, serverCall } from "@hookpost/contract";
import { isStreamFull, MAX_USER_ID_LENGTH, NO_ERASURES, toHookpostError, userHash } from "@hookpost/core";
import type { DeleteDeps } from "../sync/deps.js";
import { jetStreamPublisher } from "../sync/publish.js";

/** Fields of DeleteResponse. */
export interface DeleteUserResult {
  /** `del_<random>`: identifies this deletion request in logs. */
  requestId: string;
  /** The sources whose destinations are notified, sorted. */
  sourceIds: string[];
}

/** The message id of the notification of one request to one source (stable across retries of the publish). */
export function deletionMessageId(requestId: string, sourceId: string): string {
  return `del_${createHash("sha256").update(`${requestId}\u0000${sourceId}`).digest("base64url")}`;
}

/**
 * Delete (SPEC section 6): creates a deletion request for `userId` (the caller checked the admin
 * token). For every source that has received calls for the user and still exists, one call
 * `{type: "delete", userId, timestamp}` is stored on the EVENTS stream (subject
 * `hookpost.events.<sourceId>.delete`); the router hands it to every enabled destination of the
 * source. Answers after JetStream confirmed all of them. A user never seen: empty list, success.
 *
 * Afterwards the user's entries are removed from the user-source index: the data is deleted, so
 * the user id is no longer kept (a later call for the same id records it again, and a repeated
 * deletion with no calls in between notifies nobody). Entries are removed only for the sources
 * that were confirmed (and for sources that no longer exist): if one publish fails the request
 * fails with UNAVAILABLE / RESOURCE_EXHAUSTED, and a retry notifies only the sources still left.
 *
 * Before any notification, the request is stored in the deletions bucket (user hash only): the
 * erasure worker (docs/design/erasure.md) then erases the user's calls from every store, on any
 * replica, after a crash too; GetDeletion shows its progress. Not stored: nothing is sent either.
 */
export async function deleteUser(deps: DeleteDeps, userId: string): Promise<DeleteUserResult> {
  if (typeof userId !== "string" || userId === "") {
    throw HookpostError.invalid([{ field: "user_id", description: "required" }]);
  }
  if (userId.length > MAX_USER_ID_LENGTH) {
    throw HookpostError.invalid([
      { field: "user_id", description: `at most ${MAX_USER_ID_LENGTH} characters` },
    ]);
  }
  const requestId = `del_${randomBytes(16).toString("base64url")}`;
  const at = (deps.now?.() ?? new Date()).toISOString();
  const publish = deps.publish ?? jetStreamPublisher(deps.nc, deps.publishTimeoutMs);

  try {
    await deps.deletions.create({
      requestId,
      userHash: userHash({ userId }),
      requestTime: at,
      notifiedSources: [],
      erased: NO_ERASURES,
      passes: 0,
    });
  } catch (err) {
    // Full bucket: RESOURCE_EXHAUSTED (operations.md "Streams when full"); otherwise NATS trouble.
    const code = isStreamFull(err) ? Code.RESOURCE_EXHAUSTED : Code.UNAVAILABLE;
    throw (
      toHookpostError(err) ??
      new HookpostError(code, `deletion request not stored: ${(err as Error).message}; retry`, [], {
        cause: err,
      })
    );
  }
  deps.onRequested?.();

  // Direct lookups for the sources that exist (cost independent of how many users are known).
  const live = await deps.index.sourcesOf(
    userId,
    deps.config.sources().map((s) => s.id),
  );

  const results = await Promise.allSettled(
    live.map((sourceId) => {
      return publish(
        serverCall("delete", { messageId: deletionMessageId(requestId, sourceId), sourceId, userId }, at),
      );
    }),
  );
  const notified = live.filter((_, i) => results[i]!.status === "fulfilled");
  if (notified.length > 0) {
    try {
      await deps.deletions.update(requestId, (r) => ({ ...r, notifiedSources: [...notified].sort() }));
    } catch (err) {
      // The erasure goes on regardless; only GetDeletion's list of sources is incomplete.
      deps.log.warn(
        { requestId, err: (err as Error).message },
        "deletion: could not record the notified sources",
      );
    }
  }
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");

  try {
    await deps.index.forget(userId, notified);
  } catch (err) {
    // The notifications are stored; a stale index entry only means a repeated deletion
    // notifies that source again.
    deps.log.warn(
      { requestId, err: (err as Error).message },
      "deletion: could not forget the user's sources",
    );
  }

  if (failure) {
    const reason = failure.reason;
    const base = toHookpostError(reason);
    deps.log.warn(
      { requestId, notified: notified.length, sources: live.length, err: (reason as Error)?.message },
      "deletion request partly failed",
    );
    throw new HookpostError(
      base?.code ?? Code.UNAVAILABLE,
      `deletion request ${requestId} notified ${notified.length} of ${live.length} sources: ${
        (reason as Error)?.message ?? String(reason)
      }; retry to notify the others`,
      [],
      { cause: reason },
    );
  }
  deps.log.info({ requestId, sources: notified.length }, "deletion request stored");
  return { requestId, sourceIds: notified };
}
