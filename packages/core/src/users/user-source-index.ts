import { createHash } from "node:crypto";
import type { JetStreamManager, KV, NatsConnection, Subscription } from "nats";
import { DomainError } from "../errors.js";
import { deleteMessages } from "../nats/delete-messages.js";
import { EncodedHeaders } from "../nats/headers.js";
import { isNotFound, isWrongLastSequence, natsFailure } from "../nats/jetstream-errors.js";
import { PipelinedPublisher } from "../nats/pipelined-publisher.js";
import { countIfFull } from "../nats/stream-watch.js";
import {
  ID_PATTERN,
  kvKeySubject,
  USER_FORGOTTEN_SUBJECT,
  USER_SOURCES_BUCKET,
  USER_SOURCES_STREAM,
} from "../nats/topology.js";
import { SourceUserCounts } from "./source-user-counts.js";

export { USER_FORGOTTEN_SUBJECT, USER_SOURCES_BUCKET, USER_SOURCES_STREAM };

/**
 * Longest user id a deletion request accepts. Ingest only bounds a whole call (32 KiB), so any
 * user id it may have stored fits; longer ones are hashed in keys (see `userKeyPrefix`).
 */
export const MAX_USER_ID_LENGTH = 32 * 1024;

/** base64url user ids up to this many characters are kept readable in keys; longer are hashed. */
const MAX_PLAIN_TOKEN = 512;

/**
 * The key prefix of a user id (without the trailing dot). KV keys allow only
 * `[-/_=.a-zA-Z0-9]`, so the id is base64url-encoded (`u.<base64url>`); ids whose encoding
 * is longer than 512 characters (subjects must stay short) become `h.<base64url(sha256)>`.
 * The two forms cannot collide: they differ in the first token.
 */
export function userKeyPrefix(userId: string): string {
  const bytes = Buffer.from(userId, "utf8");
  const plain = bytes.toString("base64url");
  if (plain.length <= MAX_PLAIN_TOKEN) return `u.${plain}`;
  return `h.${createHash("sha256").update(bytes).digest("base64url")}`;
}

/** The KV key of one (user id, source id) pair: `u.<base64url(userId)>.<sourceId>`. */
export function userSourceKey(userId: string, sourceId: string): string {
  return `${userKeyPrefix(userId)}.${sourceId}`;
}

export interface UserSourceIndexOptions {
  /** Pairs kept in memory (LRU) once known to be stored; default 100 000. */
  capacity?: number;
  /** Approximate memory bound of that LRU in bytes; default 32 MiB. */
  maxBytes?: number;
  /**
   * A pair known from memory is trusted this long before it is confirmed against the bucket
   * again (a confirmation of a stored pair writes nothing). Bounds how long a replica that
   * missed a "forgotten" notice can skip re-recording a deleted user; default 1 h.
   */
  knownTtlMs?: number;
  /** Bucket replicas (1 for a single server, 3 for a cluster); default 1. */
  replicas?: number;
  /** How long JetStream has to confirm a write; default 5 000 ms. */
  timeoutMs?: number;
  /**
   * SOURCE_MAX_USERS: users one source may have in the index; a new user of a source at it is
   * refused (FULL), its known users are not. Absent: no limit, and nothing is counted.
   */
  maxUsersPerSource?: number | undefined;
  /** Told of each new user refused for the source's quota (a metric). */
  onQuotaRefused?: () => void;
}

/** Counters, for tests, benchmarks and metrics. */
export interface UserSourceIndexStats {
  /** remember() calls answered from memory. */
  hits: number;
  /** remember() calls that asked the bucket. */
  misses: number;
  /** Pairs actually written to the bucket (new pairs). */
  writes: number;
  /** Pairs in memory now. */
  cached: number;
}

const RESOLVED: Promise<void> = Promise.resolve();
/** Told to a source at its users quota: nothing frees room but deletions or a higher quota. */
const QUOTA_RETRY_AFTER_MS = 60_000;
/** A pair is written only when new: the same headers for every write, rendered once. */
const NEW_PAIR_ONLY = new EncodedHeaders();
NEW_PAIR_ONLY.set("Nats-Expected-Last-Subject-Sequence", "0");
/** Map entry overhead estimate (key string header, value, hash table slot). */
const ENTRY_OVERHEAD = 96;

/**
 * Remembers, persistently and cheaply, which sources have received calls for each user id
 * (SPEC section 6), so that a deletion request can notify exactly those sources.
 *
 * Storage: a JetStream KV bucket (`hookpost_user_sources`, history 1) with one key per pair,
 * `u.<base64url(userId)>.<sourceId>`, value the first-seen time. Listing a user's sources is a
 * key listing under `u.<base64url(userId)>.*`, which the server answers from its subject index.
 *
 * Cost: a pair is written once. `remember` first looks in a bounded in-memory LRU of pairs known
 * to be stored and resolves at once on a hit (no I/O, no allocation). On a miss it writes the key
 * with "expected last subject sequence 0": a new pair is stored, a pair already stored (by
 * another replica, or before a restart) is refused by the server without a write; either way
 * the pair then goes into the LRU. Concurrent misses for one pair share one request.
 *
 * Forgetting (after a deletion) purges the pair's messages from the stream, so the user id
 * leaves no trace in the bucket (a KV delete would keep a marker whose subject carries the id),
 * and tells every replica to drop the pairs from memory.
 */
export class UserSourceIndex {
  readonly #jsm: JetStreamManager;
  readonly #nc: NatsConnection;
  readonly #kv: KV;
  readonly #capacity: number;
  readonly #maxBytes: number;
  readonly #ttlMs: number;
  readonly #timeoutMs: number;
  /** Pair writes: many in flight at low cost each (audience syncs write one per new member). */
  readonly #pipe: PipelinedPublisher;
  /** LRU of known pairs (Map keeps insertion order; a hit moves the entry to the end). */
  readonly #known = new Map<string, number>();
  #bytes = 0;
  readonly #pending = new Map<string, Promise<void>>();
  #sub: Subscription | undefined;
  /** Users per source (SOURCE_MAX_USERS); undefined when there is no limit. */
  readonly #counts: SourceUserCounts | undefined;
  readonly #maxUsers: number;
  readonly #onQuotaRefused: () => void;
  readonly #stats = { hits: 0, misses: 0, writes: 0 };
  #nowMs = 0;
  #nowIso = "";

  private constructor(nc: NatsConnection, jsm: JetStreamManager, kv: KV, o: UserSourceIndexOptions) {
    this.#nc = nc;
    this.#jsm = jsm;
    this.#kv = kv;
    this.#capacity = o.capacity ?? 100_000;
    this.#maxBytes = o.maxBytes ?? 32 * 1024 * 1024;
    this.#ttlMs = o.knownTtlMs ?? 3_600_000;
    this.#timeoutMs = o.timeoutMs ?? 5_000;
    this.#pipe = new PipelinedPublisher(nc, this.#timeoutMs);
    this.#maxUsers = o.maxUsersPerSource ?? Number.POSITIVE_INFINITY;
    this.#counts = o.maxUsersPerSource === undefined ? undefined : new SourceUserCounts(kv, jsm);
    this.#onQuotaRefused = o.onQuotaRefused ?? (() => {});
  }

  /** Opens (creating if needed) the bucket and listens for "forgotten" notices. */
  static async open(nc: NatsConnection, options: UserSourceIndexOptions = {}): Promise<UserSourceIndex> {
    const js = nc.jetstream();
    const kv = await js.views.kv(USER_SOURCES_BUCKET, { history: 1, replicas: options.replicas ?? 1 });
    const index = new UserSourceIndex(nc, await nc.jetstreamManager(), kv, options);
    index.#sub = nc.subscribe(USER_FORGOTTEN_SUBJECT, {
      callback: (err, msg) => {
        if (err) return;
        try {
          const notice = msg.json<{ userId: string; sourceIds: string[] }>();
          for (const sourceId of notice.sourceIds) index.#evict(cacheKey(notice.userId, sourceId));
        } catch {
          // Not a notice of ours: ignore.
        }
      },
    });
    return index;
  }

  get stats(): UserSourceIndexStats {
    return { ...this.#stats, cached: this.#known.size };
  }

  /**
   * Records that `sourceId` received a call for `userId`. Resolves at once when the pair is
   * known; otherwise once the bucket has it. Calls without a user id (anonymous only) are not
   * recorded. Rejects with UNAVAILABLE when JetStream cannot confirm: the caller should fail
   * the call so the client retries (the event publish is deduplicated, this is idempotent).
   */
  remember(userId: string, sourceId: string): Promise<void> {
    if (userId === "") return RESOLVED;
    const key = cacheKey(userId, sourceId);
    const seen = this.#known.get(key);
    if (seen !== undefined && Date.now() - seen < this.#ttlMs) {
      this.#stats.hits++;
      // Move to the most recently used end.
      this.#known.delete(key);
      this.#known.set(key, seen);
      return RESOLVED;
    }
    const pending = this.#pending.get(key);
    if (pending) return pending;
    this.#stats.misses++;
    const p = this.#store(userId, sourceId).then(
      () => {
        this.#pending.delete(key);
        this.#remember(key);
      },
      (err) => {
        this.#pending.delete(key);
        throw err;
      },
    );
    this.#pending.set(key, p);
    return p;
  }

  /**
   * Records a pair without putting it into the memory LRU: for bulk writers (audience syncs)
   * whose millions of one-off users would otherwise push the hot pairs of live traffic out.
   */
  record(userId: string, sourceId: string): Promise<void> {
    if (userId === "") return RESOLVED;
    const seen = this.#known.get(cacheKey(userId, sourceId));
    if (seen !== undefined && Date.now() - seen < this.#ttlMs) return RESOLVED;
    return this.#store(userId, sourceId);
  }

  async #store(userId: string, sourceId: string): Promise<void> {
    if (!ID_PATTERN.test(sourceId)) throw new Error(`invalid source id ${JSON.stringify(sourceId)}`);
    const counts = this.#counts;
    if (counts && !(await this.#admit(userId, sourceId, counts))) return;
    let written = false;
    try {
      await this.#pipe.publish(
        kvKeySubject(USER_SOURCES_BUCKET, userSourceKey(userId, sourceId)),
        this.#firstSeen(),
        NEW_PAIR_ONLY,
      );
      this.#stats.writes++;
      written = true;
    } catch (err) {
      // Already stored: nothing to write.
      if (isWrongLastSequence(err)) return;
      if (countIfFull(USER_SOURCES_STREAM, err)) throw natsFailure("the user index is full", err);
      throw unavailable("could not record the user's source", err);
    } finally {
      counts?.settle(sourceId, written);
    }
  }

  /**
   * Whether a pair may be written: true under the source's quota (a place taken, given back by
   * the write); at it, false for a pair already stored (a user this replica's memory lost is
   * still known), else refused (FULL).
   */
  async #admit(userId: string, sourceId: string, counts: SourceUserCounts): Promise<boolean> {
    let users: number;
    let looked = false;
    for (;;) {
      try {
        const place = await counts.reserve(sourceId, this.#maxUsers);
        if (place.taken) return true;
        users = place.users;
      } catch (err) {
        throw unavailable("could not read the source's count of users", err);
      }
      if (!looked) {
        looked = true;
        let stored: boolean;
        try {
          stored = await this.#has(userSourceKey(userId, sourceId));
        } catch (err) {
          throw unavailable("could not record the user's source", err);
        }
        if (stored) return false;
        // Places may have been given back meanwhile: counted again.
        continue;
      }
      // Places held by writes under way here may be known users' (a re-confirmation after a
      // restart, a sync): refused only once they are given back and there is still no room.
      const givenBack = counts.placeGivenBack(sourceId);
      if (!givenBack) break;
      await givenBack;
    }
    this.#onQuotaRefused();
    throw new DomainError(
      "FULL",
      `source ${sourceId} has ${users} users in the user index, its quota is ${this.#maxUsers} ` +
        "(SOURCE_MAX_USERS): calls of users it has not sent before are not stored (calls of its " +
        "known users are); retry once users were deleted or the quota raised",
      { retryAfterMs: QUOTA_RETRY_AFTER_MS },
    );
  }

  /** Users recorded for the source, as far as this replica knows (undefined: not counted). */
  usersOf(sourceId: string): Promise<number> | undefined {
    return this.#counts?.count(sourceId);
  }

  /** Writes this replica's counts of users now (tests; they are written every second). */
  flushCounts(): Promise<void> {
    return this.#counts?.flush() ?? RESOLVED;
  }

  /**
   * The sources that have received calls for `userId`, sorted.
   *
   * With `candidates` (the sources that exist, from the configuration), each pair is looked up
   * directly (one indexed "last message for subject" request per candidate, in parallel): cost
   * independent of the bucket size. Without, the user's keys are listed (an ordered consumer on
   * `u.<base64url(userId)>.*`), which also finds pairs of sources that no longer exist but costs
   * time that grows with the bucket on nats-server 2.9.
   */
  async sourcesOf(userId: string, candidates?: readonly string[]): Promise<string[]> {
    if (userId === "") return [];
    const prefix = `${userKeyPrefix(userId)}.`;
    try {
      if (candidates) {
        const found = await Promise.all(
          [...new Set(candidates)].map(async (sourceId) =>
            (await this.#has(`${prefix}${sourceId}`)) ? sourceId : undefined,
          ),
        );
        return found.filter((s): s is string => s !== undefined).sort();
      }
      const out: string[] = [];
      for await (const key of await this.#kv.keys(`${prefix}*`)) out.push(key.slice(prefix.length));
      return out.sort();
    } catch (err) {
      throw unavailable("could not read the user's sources", err);
    }
  }

  async #has(key: string): Promise<boolean> {
    try {
      await this.#jsm.streams.getMessage(USER_SOURCES_STREAM, {
        last_by_subj: kvKeySubject(USER_SOURCES_BUCKET, key),
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * Forgets the given (user, source) pairs: purges them from the bucket and tells every replica
   * (this one included) to drop them from memory. Rejects with UNAVAILABLE if a purge failed.
   */
  async forget(userId: string, sourceIds: readonly string[]): Promise<void> {
    if (userId === "" || sourceIds.length === 0) return;
    try {
      // One by one, never a filtered purge (nats/delete-messages.ts says why); erased: personal data.
      for (const sourceId of sourceIds) {
        const key = kvKeySubject(USER_SOURCES_BUCKET, userSourceKey(userId, sourceId));
        const erased = await deleteMessages(this.#jsm, USER_SOURCES_STREAM, key, { erase: true });
        if (erased > 0) this.#counts?.add(sourceId, -erased);
      }
    } catch (err) {
      throw unavailable("could not forget the user's sources", err);
    } finally {
      for (const sourceId of sourceIds) this.#evict(cacheKey(userId, sourceId));
      // Core NATS: replicas that miss it (disconnected) re-confirm after knownTtlMs.
      this.#nc.publish(USER_FORGOTTEN_SUBJECT, JSON.stringify({ userId, sourceIds }));
    }
  }

  /**
   * Forgets every pair of a source (call it when the source is deleted), one by one (never a
   * filtered purge: nats/delete-messages.ts). Memory entries of other replicas expire after
   * knownTtlMs (the source no longer takes calls).
   */
  async forgetSource(sourceId: string): Promise<void> {
    if (!ID_PATTERN.test(sourceId)) throw new Error(`invalid source id ${JSON.stringify(sourceId)}`);
    try {
      await deleteMessages(
        this.#jsm,
        USER_SOURCES_STREAM,
        kvKeySubject(USER_SOURCES_BUCKET, `*.*.${sourceId}`),
        {
          erase: true,
        },
      );
      await this.#counts?.drop(sourceId);
    } catch (err) {
      throw unavailable("could not forget the source's users", err);
    }
    for (const key of this.#known.keys())
      if (key.startsWith(`${sourceId}\u0000`) || key.endsWith(`.${sourceId}`)) this.#evict(key);
  }

  /** Drops every pair from memory (tests, benchmarks). */
  clearMemory(): void {
    this.#known.clear();
    this.#bytes = 0;
  }

  /** Resolves once what was counted in the last second is written (if NATS is still there). */
  async close(): Promise<void> {
    this.#pipe.close();
    this.#sub?.unsubscribe();
    this.#sub = undefined;
    await this.#counts?.close();
  }

  /** The value of a new pair: now, as ISO time (rendered once per millisecond, not per write). */
  #firstSeen(): string {
    const now = Date.now();
    if (now !== this.#nowMs) {
      this.#nowMs = now;
      this.#nowIso = new Date(now).toISOString();
    }
    return this.#nowIso;
  }

  #remember(key: string): void {
    if (this.#known.has(key)) this.#evict(key);
    this.#known.set(key, Date.now());
    this.#bytes += key.length * 2 + ENTRY_OVERHEAD;
    while (this.#known.size > this.#capacity || (this.#bytes > this.#maxBytes && this.#known.size > 0)) {
      const oldest = this.#known.keys().next().value as string;
      this.#evict(oldest);
    }
  }

  #evict(key: string): void {
    if (this.#known.delete(key)) this.#bytes -= key.length * 2 + ENTRY_OVERHEAD;
  }
}

/** Memory key of a pair: readable for short ids, bounded (the KV key) for long ones. */
function cacheKey(userId: string, sourceId: string): string {
  return userId.length <= 256 ? `${sourceId}\u0000${userId}` : userSourceKey(userId, sourceId);
}

function unavailable(what: string, err: unknown): DomainError {
  const msg = err instanceof Error ? err.message : String(err);
  return new DomainError("UNAVAILABLE", `${what}: JetStream is unavailable (${msg}); retry later`, {
    cause: err,
  });
}
