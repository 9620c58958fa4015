import { DomainError } from "../errors.js";
import { LineReader, parseEntry, unescapeField } from "../membership/lines.js";
import type { MembershipStore } from "../membership/membership-store.js";
import { userHash } from "../users/user-hash.js";

/** Bytes of kept lines gathered before they are handed to the upload. */
const BATCH_BYTES = 64 * 1024;

/** The user hash of a membership list's line (`<escaped id>` or `<escaped id>\t<value>`). */
const memberOf = (line: string) => userHash({ userId: unescapeField(parseEntry(line).id) });

/** Which of `users` are members in `content` (a list's bytes), added to `found`. */
async function membersIn(
  content: AsyncIterable<Uint8Array>,
  users: ReadonlySet<string>,
  found = new Set<string>(),
): Promise<Set<string>> {
  const lines = new LineReader(content);
  for (let line = await lines.next(); line !== undefined; line = await lines.next()) {
    const user = memberOf(line);
    if (users.has(user)) found.add(user);
  }
  return found;
}

/** `content` without the lines of `users`, still sorted (lines keep their order). */
async function* without(
  content: AsyncIterable<Uint8Array>,
  users: ReadonlySet<string>,
): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  const lines = new LineReader(content);
  let batch: string[] = [];
  let bytes = 0;
  for (let line = await lines.next(); line !== undefined; line = await lines.next()) {
    if (users.has(memberOf(line))) continue;
    batch.push(line, "\n");
    bytes += line.length + 1;
    if (bytes >= BATCH_BYTES) {
      yield encoder.encode(batch.join(""));
      batch = [];
      bytes = 0;
    }
  }
  if (bytes > 0) yield encoder.encode(batch.join(""));
}

/** What a pass over the memberships did. */
export interface MembershipErasure {
  /** Per user hash: the lists (and leftovers) the user was removed from. */
  erased: Map<string, number>;
  /**
   * Lists that could not be read (CORRUPT: a chunk missing, a digest that does not match): they
   * may still hold a user, so no request is done while there are any. Syncs of them fail too.
   */
  unreadable: string[];
}

/** A list whose content fails its checks (or is not text): not one a pass can rewrite. */
const isUnreadable = (err: unknown) =>
  (err instanceof DomainError && err.code === "CORRUPT") || err instanceof TypeError;

/**
 * Removes the users of pending deletions (user hash → time of the request, ms) from audience and
 * computed-trait memberships (MembershipStore): the member lists of the last syncs, which hold
 * user ids. A list stored before a user's request plus `settleMs` is rewritten without them (a
 * list stored later came from a sync after the request: new data, as for calls); the swap is
 * compare-and-set against the version read, and the old version's chunks are erased. Then
 * leftover chunks no list refers to (a write that failed or died) are erased whole. Idempotent
 * like the rest of the pass: a replica that loses the swap, or finds the user gone, counts
 * nothing. An unreadable list is passed over (and reported), not allowed to stop the others.
 *
 * The next sync then compares against a list without the user: a user the customer no longer
 * lists gets no "left" identify call, one still listed joins again (new data).
 */
export async function eraseMemberships(
  store: MembershipStore,
  users: ReadonlyMap<string, number>,
  settleMs: number,
  /** Where the counts go as lists are rewritten: the caller keeps them if the pass fails half-way. */
  erased: Map<string, number> = new Map(),
): Promise<MembershipErasure> {
  const unreadable: string[] = [];
  const credit = (found: Iterable<string>) => {
    for (const user of found) erased.set(user, (erased.get(user) ?? 0) + 1);
  };
  // Chunks of every list seen: the rest, once abandoned, are leftovers.
  const referenced = new Set<string>();
  // The list walk reaches the versions this pass wrote too: nothing to look for in them.
  const rewritten = new Set<number>();
  for await (const { membership, storedMs } of store.list()) {
    referenced.add(membership.nuid);
    if (rewritten.has(membership.revision)) continue;
    const dropping = new Set<string>();
    for (const [user, requested] of users) if (storedMs < requested + settleMs) dropping.add(user);
    if (dropping.size === 0) continue;
    try {
      const found = await membersIn(store.chunks(membership), dropping);
      if (found.size === 0) continue;
      const written = await store.write(
        membership.name,
        without(store.chunks(membership), found),
        membership,
      );
      // The old chunks are erased by the write; if that failed, they are leftovers now.
      referenced.delete(membership.nuid);
      referenced.add(written.nuid);
      rewritten.add(written.revision);
      credit(found);
    } catch (err) {
      // A sync swapped in a new list after this pass started: stored after the pass began, it is
      // read by the next pass if it is early enough to be erased, and the request is not done yet.
      if (err instanceof DomainError && err.code === "CONFLICT") continue;
      if (!isUnreadable(err)) throw err;
      unreadable.push(membership.name);
    }
  }
  const everyone = new Set(users.keys());
  for (const left of await store.leftovers(referenced)) {
    const found = new Set<string>();
    await membersIn(store.leftoverContent(left), everyone, found).catch((err) => {
      // A write that died may have cut a character in two: its last line is then no one's.
      if (!(err instanceof TypeError)) throw err;
    });
    if (await store.eraseLeftover(left)) credit(found);
  }
  return { erased, unreadable };
}
