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

  /** Requests not done yet, oldest first. */
  async pending(): Promise<DeletionRecord[]> {
    const out: DeletionRecord[] = [];
    for await (const key of await this.#kv.keys()) {
      const r = await this.get(key);
      if (r && r.doneTime === undefined) out.push(r);
    }
    return out.sort((a, b) => a.requestTime.localeCompare(b.requestTime));
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
