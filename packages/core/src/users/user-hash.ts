import { hash } from "node:crypto";

/**
 * The pseudonymous key of a call's user: the first 128 bits of SHA-256 of userId, else
 * anonymousId (calls with neither share one key). It is what PER_USER ordering puts in subjects
 * and what erasure finds a user's records by (USER_HASH_HEADER, `userHash` fields): ids may hold
 * any character and personal data, and subjects, headers and deletion requests must not.
 */
export function userHash(call: { userId?: string | undefined; anonymousId?: string | undefined }): string {
  const key = call.userId ? `u:${call.userId}` : call.anonymousId ? `a:${call.anonymousId}` : "none";
  return hash("sha256", key, "hex").slice(0, 32);
}

/**
 * Whether a call's records carry its user for erasure (and search): any call that names a user
 * but a deletion notice.
 */
export function erasable(call: {
  type?: string;
  userId?: string | undefined;
  anonymousId?: string | undefined;
}): boolean {
  return call.type !== "delete" && Boolean(call.userId || call.anonymousId);
}
