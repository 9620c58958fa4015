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
  /**
   * Set when a pass found nothing left that started at least the settle time after the request,
   * and after `lastErasedTime`.
   */
  doneTime?: string;
  /**
   * When a pass last credited something it erased. A delivery erased while its attempt was under
   * way is parked again, dead-lettered or recorded when the attempt ends (within the settle time,
   * which exceeds the longest attempt): the request is not done before a pass has seen that.
   */
  lastErasedTime?: string;
  /**
   * Passes under way for this request (pass id → start time, ISO): a pass that found nothing
   * marks the request done only when no other pass is under way, since another replica's pass
   * may have erased what this one did not find and not have counted it yet. An entry older than
   * STALE_PASS_MS (a replica that died mid-pass) is ignored and dropped.
   */
  activePasses?: Record<string, string>;
}

/** A pass registered longer ago than this is taken for dead (its replica crashed). */
export const STALE_PASS_MS = 10 * 60_000;

/** The record's passes under way but `except`, without the stale ones. */
export function livePasses(r: DeletionRecord, now: number, except?: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [id, at] of Object.entries(r.activePasses ?? {})) {
    if (id !== except && now - Date.parse(at) < STALE_PASS_MS) out[id] = at;
  }
  return out;
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
