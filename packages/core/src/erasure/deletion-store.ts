import type { KV, NatsConnection } from "nats";
import { isWrongLastSequence } from "../nats/jetstream-errors.js";
import { DELETIONS_BUCKET } from "../nats/topology.js";
import { type DeletionRecord, NO_ERASURES } from "./deletion-record.js";

export interface DeletionStoreOptions {
  /** Bucket replicas (1 for a single server, 3 for a cluster); default 1. */
  replicas?: number;
  /** How long a request (and its status) is kept; DELETION_STATUS_MAX_AGE. */
  maxAgeMs: number;
}

/** Compare-and-set retries of one update before giving up (replicas racing on one request). */
const MAX_CAS_ATTEMPTS = 10;

/**
 * Deletion requests in a KV bucket: erasure's durable to-do list (any API replica picks pending
 * ones up, after a restart too) and the status GetDeletion answers. Updates are compare-and-set,
 * so replicas erasing at once add their counts without losing one.
 */
export class DeletionStore {
  readonly #kv: KV;
  /**
   * The bucket's state (see #state) when a listing last found nothing pending: while it is
   * unchanged, nothing can be, and `pending` answers without listing the keys.
   */
  #idleAt: string | undefined;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  static async open(nc: NatsConnection, o: DeletionStoreOptions): Promise<DeletionStore> {
    const kv = await nc.jetstream().views.kv(DELETIONS_BUCKET, {
      history: 1,
      replicas: o.replicas ?? 1,
      ttl: o.maxAgeMs,
    });
    return new DeletionStore(kv);
  }

  async create(r: DeletionRecord): Promise<void> {
    await this.#kv.create(r.requestId, JSON.stringify(r));
  }

  async get(requestId: string): Promise<DeletionRecord | undefined> {
    return (await this.#read(requestId))?.record;
  }

  /** The stored request and its revision; undefined when absent (or deleted). */
  async #read(requestId: string): Promise<{ record: DeletionRecord; revision: number } | undefined> {
    const e = await this.#kv.get(requestId);
    if (e?.operation !== "PUT" || e.value.length === 0) return undefined;
    const record = e.json<DeletionRecord>();
    // Requests stored before a kind of store was erased have no count for it.
    return { record: { ...record, erased: { ...NO_ERASURES, ...record.erased } }, revision: e.revision };
  }

  /**
   * Requests not done yet, oldest first. Asked every ERASURE_INTERVAL on every replica, mostly
   * when there is none: then it costs one stream info, not a key listing.
   */
  async pending(): Promise<DeletionRecord[]> {
    // Read before listing: a request stored meanwhile changes it, so the next call lists again.
    const state = await this.#state();
    if (state === this.#idleAt) return [];
    // Keys first, records after: nats.js drops the keys not read yet when its listing ends while
    // the loop awaits a read, so a request stored after another was missed (nats.js 2.29).
    const keys: string[] = [];
    for await (const key of await this.#kv.keys()) keys.push(key);
    const out: DeletionRecord[] = [];
    for (const key of keys) {
      const r = await this.get(key);
      if (r && r.doneTime === undefined) out.push(r);
    }
    this.#idleAt = out.length === 0 ? state : undefined;
    return out.sort((a, b) => a.requestTime.localeCompare(b.requestTime));
  }

  /**
   * What changes whenever a request could have become pending: every write, on any replica, takes
   * the next sequence (expiry only removes requests); the creation time tells a stream recreated
   * (NATS lost its store) from the old one at the same sequence.
   */
  async #state(): Promise<string> {
    const si = (await this.#kv.status()).streamInfo;
    return `${si.created} ${si.state.last_seq}`;
  }

  /** Applies `change` to the stored request (compare-and-set, retried); undefined when it is gone. */
  async update(
    requestId: string,
    change: (r: DeletionRecord) => DeletionRecord,
  ): Promise<DeletionRecord | undefined> {
    for (let i = 0; ; i++) {
      const cur = await this.#read(requestId);
      if (!cur) return undefined;
      const next = change(cur.record);
      try {
        await this.#kv.update(requestId, JSON.stringify(next), cur.revision);
        return next;
      } catch (err) {
        if (!isWrongLastSequence(err) || i + 1 >= MAX_CAS_ATTEMPTS) throw err;
      }
    }
  }
}
