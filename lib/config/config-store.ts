import { EventEmitter } from "node:events";
import type { KV, KvEntry, NatsConnection, Subscription } from "nats";
import type { DestinationRecord } from "../model/destination.js";
import { hashWriteKey, type SourceRecord } from "../model/source.js";
import { CONFIG_BUCKET } from "../nats/topology.js";

export type ConfigChange =
  | { kind: "source"; id: string; record: SourceRecord | undefined }
  | { kind: "destination"; id: string; record: DestinationRecord | undefined };

/** Thrown by createSource/createDestination when the id is already taken. */
export class AlreadyExistsError extends Error {
  override readonly name = "AlreadyExistsError";
}

const SOURCE = "source.";
const DESTINATION = "destination.";

/**
 * Sources and destinations live in a JetStream KV bucket (replicated with the cluster).
 * Every replica watches the whole bucket and serves reads from memory, so a change made
 * anywhere is seen everywhere within milliseconds, and the hot path never waits on KV.
 *
 * Events: "change" (ConfigChange) after the snapshot changed.
 */
export class ConfigStore extends EventEmitter<{ change: [ConfigChange] }> {
  readonly #kv: KV;
  readonly #sources = new Map<string, SourceRecord>();
  readonly #destinations = new Map<string, DestinationRecord>();
  readonly #byKeyHash = new Map<string, string>();
  #stop: (() => void) | undefined;
  #closed = false;
  #rewatching = false;
  #advisories: Subscription | undefined;

  private constructor(kv: KV) {
    super();
    this.#kv = kv;
  }

  /** Opens (creating if needed) the bucket and resolves once the current contents are loaded. */
  static async open(nc: NatsConnection, options: { replicas?: number } = {}): Promise<ConfigStore> {
    const kv = await nc.jetstream().views.kv(CONFIG_BUCKET, { history: 1, replicas: options.replicas ?? 1 });
    const store = new ConfigStore(kv);
    await store.#watch();
    store.#rewatchOnReconnect(nc);
    store.#rewatchOnLeaderChange(nc);
    return store;
  }

  /**
   * When NATS comes back (perhaps a restarted server that lost the watcher's consumer), watch
   * again at once instead of waiting for the client to notice missed heartbeats (10 s and
   * more), so changes made meanwhile or just after are seen within the usual 2 s.
   */
  #rewatchOnReconnect(nc: NatsConnection): void {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "reconnect") await this.#rewatch();
        if (this.#closed) return;
      }
    })().catch(() => {});
  }

  /**
   * The watcher's consumer lives with the bucket's stream leader: when that server dies, the
   * client notices only after missed heartbeats (10 s and more). A new leader's advisory
   * says so at once: watch again then.
   */
  #rewatchOnLeaderChange(nc: NatsConnection): void {
    this.#advisories = nc.subscribe(`$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.KV_${CONFIG_BUCKET}`, {
      callback: () => {
        if (!this.#closed) void this.#rewatch();
      },
    });
  }

  /** Watches again from the current contents (which include the changes made in between). */
  async #rewatch(): Promise<void> {
    if (this.#rewatching) return;
    this.#rewatching = true;
    try {
      for (let attempt = 1; !this.#closed; attempt++) {
        try {
          this.#stop?.();
          await this.#watch();
          return;
        } catch {
          // JetStream may still be starting on the server, or the bucket electing a leader.
          await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * attempt)));
        }
      }
    } finally {
      this.#rewatching = false;
    }
  }

  async #watch(): Promise<void> {
    let initialized!: () => void;
    const ready = new Promise<void>((resolve) => {
      initialized = resolve;
    });
    const iter = await this.#kv.watch({ key: ">", initializedFn: () => initialized() });
    let stopped = false;
    this.#stop = () => {
      stopped = true;
      iter.stop();
    };
    void (async () => {
      for await (const e of iter) this.#apply(e);
    })()
      .catch(() => {})
      // The client could not recreate its watcher (a cluster that lost the bucket's leader for
      // a while ends it with an error): start a new one rather than go deaf to changes.
      .finally(() => {
        if (!stopped && !this.#closed) void this.#rewatch();
      });
    await ready;
  }

  #apply(e: KvEntry): void {
    const removed = e.operation !== "PUT";
    if (e.key.startsWith(SOURCE)) {
      const id = e.key.slice(SOURCE.length);
      this.#setSource(id, removed ? undefined : (e.json() as SourceRecord));
    } else if (e.key.startsWith(DESTINATION)) {
      const id = e.key.slice(DESTINATION.length);
      this.#setDestination(id, removed ? undefined : (e.json() as DestinationRecord));
    }
  }

  #setSource(id: string, record: SourceRecord | undefined): void {
    const old = this.#sources.get(id);
    if (old) this.#byKeyHash.delete(old.writeKeyHash);
    if (record) {
      this.#sources.set(id, record);
      this.#byKeyHash.set(record.writeKeyHash, id);
    } else {
      this.#sources.delete(id);
    }
    this.emit("change", { kind: "source", id, record });
  }

  #setDestination(id: string, record: DestinationRecord | undefined): void {
    if (record) this.#destinations.set(id, record);
    else this.#destinations.delete(id);
    this.emit("change", { kind: "destination", id, record });
  }

  // Reads (from memory).

  source(id: string): SourceRecord | undefined {
    return this.#sources.get(id);
  }

  sources(): SourceRecord[] {
    return [...this.#sources.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** The source a write key belongs to, if any. */
  sourceByWriteKey(writeKey: string): SourceRecord | undefined {
    const id = this.#byKeyHash.get(hashWriteKey(writeKey));
    return id === undefined ? undefined : this.#sources.get(id);
  }

  destination(id: string): DestinationRecord | undefined {
    return this.#destinations.get(id);
  }

  destinations(): DestinationRecord[] {
    return [...this.#destinations.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** Destinations connected to a source (enabled or not). */
  destinationsForSource(sourceId: string): DestinationRecord[] {
    return this.destinations().filter((d) => d.sourceIds.includes(sourceId));
  }

  // Writes: to KV, then applied locally at once so the writer reads its own write.

  async putSource(record: SourceRecord): Promise<void> {
    await this.#kv.put(SOURCE + record.id, JSON.stringify(record));
    this.#setSource(record.id, record);
  }

  /**
   * Like putSource, but only when no source has this id. KV checks it, so two replicas
   * creating the same id at once cannot both succeed. Throws AlreadyExistsError.
   */
  async createSource(record: SourceRecord): Promise<void> {
    await this.#create(SOURCE + record.id, record);
    this.#setSource(record.id, record);
  }

  async deleteSource(id: string): Promise<void> {
    await this.#kv.delete(SOURCE + id);
    this.#setSource(id, undefined);
  }

  async putDestination(record: DestinationRecord): Promise<void> {
    await this.#kv.put(DESTINATION + record.id, JSON.stringify(record));
    this.#setDestination(record.id, record);
  }

  /** Like putDestination, but only when no destination has this id. Throws AlreadyExistsError. */
  async createDestination(record: DestinationRecord): Promise<void> {
    await this.#create(DESTINATION + record.id, record);
    this.#setDestination(record.id, record);
  }

  async #create(key: string, record: SourceRecord | DestinationRecord): Promise<void> {
    try {
      await this.#kv.create(key, JSON.stringify(record));
    } catch (err) {
      // 10071: wrong last sequence, i.e. the key exists.
      if ((err as { api_error?: { err_code?: number } }).api_error?.err_code === 10071) {
        throw new AlreadyExistsError(`${key} already exists`);
      }
      throw err;
    }
  }

  async deleteDestination(id: string): Promise<void> {
    await this.#kv.delete(DESTINATION + id);
    this.#setDestination(id, undefined);
  }

  close(): void {
    this.#closed = true;
    this.#advisories?.unsubscribe();
    this.#stop?.();
    this.#stop = undefined;
  }
}
