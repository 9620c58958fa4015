/** What erasure removed for one deletion request, per kind of store. */
export interface ErasedCounts {
  /** Records on DEAD. */
  deadLetters: number;
  /** Attempt, routing and dead records on ATTEMPTS. */
  attemptRecords: number;
  /** Calls not delivered yet: on EVENTS, DELIVERIES (partitions and lanes) and ORDERED. */
  pendingCalls: number;
  /**
   * Audience and computed-trait memberships (the member lists of the last syncs) the user was
   * removed from, and leftover copies of such lists erased. Absent in requests stored before
   * memberships were erased: read as 0.
   */
  memberships: number;
}

export const NO_ERASURES: ErasedCounts = {
  deadLetters: 0,
  attemptRecords: 0,
  pendingCalls: 0,
  memberships: 0,
};

/**
 * A deletion request as stored in DELETIONS_BUCKET (key: the request id). Written before the
 * notifications go out, so that an erasure is never lost to a crash; the erasure worker adds up
 * what it removed and sets `doneTime`. Holds the user's hash (users/user-hash.ts), never the id.
 */
export interface DeletionRecord {
  requestId: string;
  userHash: string;
  requestTime: string;
  /** Sources whose destinations were sent the deletion notice (filled in once they are stored). */
  notifiedSources: string[];
  erased: ErasedCounts;
  /** Passes made over the stores for this request. */
  passes: number;
  /** Set when a pass started at least the settle time after the request found nothing left. */
  doneTime?: string;
}

export function addCounts(a: ErasedCounts, b: ErasedCounts): ErasedCounts {
  return {
    deadLetters: a.deadLetters + b.deadLetters,
    attemptRecords: a.attemptRecords + b.attemptRecords,
    pendingCalls: a.pendingCalls + b.pendingCalls,
    memberships: a.memberships + b.memberships,
  };
}

export const isZero = (c: ErasedCounts) =>
  c.deadLetters + c.attemptRecords + c.pendingCalls + c.memberships === 0;
