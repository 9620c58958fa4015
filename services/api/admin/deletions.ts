import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, HookpostError } from "@hookpost/contract";
import type { DeletionStore } from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import type { AdminHandlers } from "./sources.js";

export interface DeletionDeps {
  deletions: DeletionStore;
}

/** Request ids are `del_` and base64url (deletion/delete-user.ts): anything else is not one. */
const REQUEST_ID = /^del_[A-Za-z0-9_-]{1,64}$/;

/** GetDeletion: a deletion request's notified sources, what erasure removed, and when it was done. */
export function deletionHandlers(deps: DeletionDeps) {
  return {
    getDeletion: async (req) => {
      const id = req.requestId;
      throwIfInvalid(
        id === ""
          ? [{ field: "request_id", description: "required" }]
          : REQUEST_ID.test(id)
            ? []
            : [{ field: "request_id", description: "not a deletion request id (del_…)" }],
      );
      const r = await deps.deletions.get(id);
      if (!r)
        throw new HookpostError(Code.NOT_FOUND, `deletion request "${id}" is not known (or has expired)`);
      return {
        requestId: r.requestId,
        notifiedSourceIds: r.notifiedSources,
        requestTime: timestampFromDate(new Date(r.requestTime)),
        ...(r.doneTime === undefined ? {} : { doneTime: timestampFromDate(new Date(r.doneTime)) }),
        erasedDeadLetters: BigInt(r.erased.deadLetters),
        erasedAttemptRecords: BigInt(r.erased.attemptRecords),
        erasedPendingCalls: BigInt(r.erased.pendingCalls),
        erasedMemberships: BigInt(r.erased.memberships),
        passes: r.passes,
      };
    },
  } satisfies AdminHandlers;
}
