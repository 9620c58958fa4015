import { EventEmitter } from "node:events";
import { MAX_URLS } from "@hookpost/contract";
import type { KV, KvEntry, NatsConnection, Subscription } from "nats";
import { DomainError } from "../errors.js";
import { type DestinationRecord, targetView } from "../model/destination.js";
import {
  isOperatorTarget,
  type OperatorWebhookRecord,
  operatorTarget,
  operatorTargetId,
} from "../model/operator-webhook.js";
import { hashWriteKey, type SourceRecord } from "../model/source.js";
import { isWrongLastSequence, natsFailure } from "../nats/jetstream-errors.js";
import { countIfFull } from "../nats/stream-watch.js";
import { CONFIG_BUCKET, kvStream, splitTarget } from "../nats/topology.js";
import type { Envelope } from "../secrets/envelope.js";
import type { Keyring } from "../secrets/keyring.js";
import {
  openDestination,
  type StoredDestination,
  sealDestination,
  sealedWith,
} from "../secrets/sealed-destination.js";
import {
  openOperatorWebhook,
  type StoredOperatorWebhook,
  sealOperatorWebhook,
} from "../secrets/sealed-operator-webhook.js";
import { SecretsKeyError } from "../secrets/secrets-key-error.js";

/** Targets' views per record: records are replaced, never changed, on a revision. */
const targetViews = new WeakMap<DestinationRecord, DestinationRecord[]>();

export type ConfigChange =
  | { kind: "source"; id: string; record: SourceRecord | undefined }
  | { kind: "destination"; id: string; record: DestinationRecord | undefined }
  | { kind: "operator_webhook"; id: string; record: OperatorWebhookRecord | undefined };

/** Thrown by createSource/createDestination when the id is already taken. */
export class AlreadyExistsError extends DomainError {
  override readonly name = "AlreadyExistsError";

  constructor(message: string) {
    super("ALREADY_EXISTS", message);
  }
}

/**
 * Thrown by changeSource/changeDestination when the record kept changing under every retry (or
 * a change function refused to apply on top of a newer record): nothing was written.
 */
export class ConflictError extends DomainError {
  override readonly name = "ConflictError";

  constructor(message: string) {
    super("CONFLICT", message);
  }
}

export interface ConfigStoreOptions {
  replicas?: number;
  /**
   * SECRETS_KEYS: destinations' secrets and header values are sealed with its first key when
   * written, and opened with the key each names when read. Absent: written in clear (records
   * sealed earlier then cannot be read: SecretsKeyError).
   */
  keyring?: Keyring | undefined;
  /**
   * The dispatcher's view: destination(id) also answers the delivery targets of operator webhooks
   * (`_ops_<id>`, model/operator-webhook.ts), so that the delivery core carries operational events
   * like any webhook. destinations() never lists them.
   */
  operatorTargets?: boolean;
}

/** How a record is turned into the bucket's bytes and back. */
interface Codec<T> {
  decode(stored: unknown): T;
  encode(record: T): string;
}

/**
 * One kind of record in the bucket: where its keys start, how it is stored, and how a write or a
 * watched entry is applied to this replica's snapshot. Every write and every entry of every kind
 * goes through the same steps (#put, #create, #change, #delete, #applyEntry).
 */
interface Kind<T extends { id: string }> {
  prefix: string;
  codec: Codec<T>;
  /** record undefined: deleted. sealedKey: the key it is stored sealed with; undefined: in clear. */
  set(id: string, record: T | undefined, revision: number, sealedKey: string | undefined): void;
}

/** Read-modify-write attempts on one record before giving up with ConflictError. */
export const MAX_CHANGE_ATTEMPTS = 10;

const SOURCE = "source.";
const DESTINATION = "destination.";
const OPERATOR_WEBHOOK = "operator_webhook.";

/** Sources hold no secret (only their write key's hash): stored as they are. */
const SOURCES: Codec<SourceRecord> = {
  decode: (stored) => stored as SourceRecord,
  encode: (record) => JSON.stringify(record),
};

/**
 * Sources and destinations live in a JetStream KV bucket (replicated with the cluster).
 * Every replica watches the whole bucket and serves reads from memory, so a change made
 * anywhere is seen everywhere within milliseconds, and the hot path never waits on KV.
 *
 * Secrets at rest: destinations are sealed and opened here, and only here (sealed-destination.ts),
 * so every reader gets them in clear in memory and nothing else knows they are encrypted.
 *
 * Events: "change" (ConfigChange) after the snapshot changed; "unreadable" (SecretsKeyError) when
 * a record written after the start cannot be opened with this replica's keys (it is not applied).
 */
export class ConfigStore extends EventEmitter<{ change: [ConfigChange]; unreadable: [SecretsKeyError] }> {
  readonly #kv: KV;
  readonly #keyring: Keyring | undefined;
  readonly #sourceKind: Kind<SourceRecord>;
  readonly #destinationKind: Kind<DestinationRecord>;
  readonly #operatorKind: Kind<OperatorWebhookRecord>;
  /** The three, for the watch to find an entry's. */
  readonly #kinds: readonly Kind<{ id: string }>[];
  readonly #operatorTargets: boolean;
  readonly #operatorWebhooks = new Map<string, OperatorWebhookRecord>();
  /** Delivery target id -> the webhook as a destination (only with operatorTargets). */
  readonly #targets = new Map<string, DestinationRecord>();
  /** The key each operator webhook is stored sealed with; undefined: in clear. */
  readonly #operatorSealedWith = new Map<string, string | undefined>();
  /** The key each destination is stored sealed with; undefined: in clear. */
  readonly #sealedWith = new Map<string, string | undefined>();
  /** A record of the initial contents this replica cannot open: open() fails with it. */
  #openError: SecretsKeyError | undefined;
  #initialized = false;
  readonly #sources = new Map<string, SourceRecord>();
  readonly #destinations = new Map<string, DestinationRecord>();
  /** destinationsForSource() answers, built on demand and dropped for the sources a change touches. */
  readonly #bySource = new Map<string, DestinationRecord[]>();
  /** Source id -> ids of the destinations connected to it. */
  readonly #destinationIdsBySource = new Map<string, Set<string>>();
  readonly #byKeyHash = new Map<string, string>();
  /** KV revision of each destination's current entry, for revision-checked updates. */
  readonly #destinationRevisions = new Map<string, number>();
  /** The highest configuration revision applied here (see `revision`). */
  #revision = 0;
  #stop: (() => void) | undefined;
  #closed = false;
  #rewatching = false;
  #advisories: Subscription | undefined;

  private constructor(kv: KV, keyring: Keyring | undefined, operatorTargets: boolean) {
    super();
    this.#kv = kv;
    this.#keyring = keyring;
    this.#operatorTargets = operatorTargets;
    this.#sourceKind = { prefix: SOURCE, codec: SOURCES, set: (id, record) => this.#setSource(id, record) };
    this.#destinationKind = {
      prefix: DESTINATION,
      codec: {
        decode: (stored) => openDestination(stored as StoredDestination, keyring),
        encode: (record) => JSON.stringify(sealDestination(record, keyring)),
      },
      set: (id, record, revision, sealedKey) => this.#setDestination(id, record, revision, sealedKey),
    };
    this.#operatorKind = {
      prefix: OPERATOR_WEBHOOK,
      codec: {
        decode: (stored) => openOperatorWebhook(stored as StoredOperatorWebhook, keyring),
        encode: (record) => JSON.stringify(sealOperatorWebhook(record, keyring)),
      },
      set: (id, record, _revision, sealedKey) => this.#setOperatorWebhook(id, record, sealedKey),
    };
    this.#kinds = [this.#sourceKind, this.#destinationKind, this.#operatorKind];
  }

  /**
   * Opens (creating if needed) the bucket and resolves once the current contents are loaded.
   * Rejects with SecretsKeyError when a stored destination's secrets do not open with the keyring.
   */
  static async open(nc: NatsConnection, options: ConfigStoreOptions = {}): Promise<ConfigStore> {
    const kv = await nc.jetstream().views.kv(CONFIG_BUCKET, { history: 1, replicas: options.replicas ?? 1 });
    const store = new ConfigStore(kv, options.keyring, options.operatorTargets ?? false);
    await store.#watch();
    store.#initialized = true;
    if (store.#openError) {
      store.close();
      throw store.#openError;
    }
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
    for (const kind of this.#kinds) {
      if (e.key.startsWith(kind.prefix)) {
        this.#applyEntry(kind, e);
        return;
      }
    }
    this.#applied(e.revision);
  }

  #applyEntry<T extends { id: string }>(kind: Kind<T>, e: KvEntry): void {
    const id = e.key.slice(kind.prefix.length);
    if (e.operation !== "PUT") {
      this.#applied(e.revision);
      kind.set(id, undefined, e.revision, undefined);
      return;
    }
    const stored = e.json<{ sealed?: Envelope }>();
    const record = this.#opened(stored, kind.codec);
    if (!record) return;
    this.#applied(e.revision);
    kind.set(id, record, e.revision, sealedWith(stored));
  }

  /**
   * A stored record with its secrets opened; undefined when this replica's keys do not open them
   * (neither applied nor counted as applied: the previous version, if any, stays in force).
   */
  #opened<T>(stored: unknown, codec: Codec<T>): T | undefined {
    try {
      return codec.decode(stored);
    } catch (err) {
      if (!(err instanceof SecretsKeyError)) throw err;
      if (this.#initialized) this.emit("unreadable", err);
      else this.#openError ??= err;
      return undefined;
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

  #setDestination(
    id: string,
    record: DestinationRecord | undefined,
    revision: number,
    /** The key it is stored sealed with; undefined: in clear. */
    sealedKey: string | undefined,
  ): void {
    // Only the sources this destination leaves or joins get their list built again: with
    // thousands of destinations, dropping every list at each change made routing O(destinations).
    for (const s of this.#destinations.get(id)?.sourceIds ?? []) {
      this.#destinationIdsBySource.get(s)?.delete(id);
      this.#bySource.delete(s);
    }
    if (record) {
      this.#destinations.set(id, record);
      for (const s of record.sourceIds ?? []) {
        let ids = this.#destinationIdsBySource.get(s);
        if (!ids) {
          ids = new Set();
          this.#destinationIdsBySource.set(s, ids);
        }
        ids.add(id);
        this.#bySource.delete(s);
      }
      this.#sealedWith.set(id, sealedKey);
    } else {
      this.#destinations.delete(id);
      this.#sealedWith.delete(id);
    }
    this.#destinationRevisions.set(id, revision);
    this.emit("change", { kind: "destination", id, record });
  }

  #setOperatorWebhook(
    id: string,
    record: OperatorWebhookRecord | undefined,
    sealedKey: string | undefined,
  ): void {
    if (record) {
      this.#operatorWebhooks.set(id, record);
      this.#operatorSealedWith.set(id, sealedKey);
      if (this.#operatorTargets) this.#targets.set(operatorTargetId(id), operatorTarget(record));
    } else {
      this.#operatorWebhooks.delete(id);
      this.#operatorSealedWith.delete(id);
      this.#targets.delete(operatorTargetId(id));
    }
    this.emit("change", { kind: "operator_webhook", id, record });
  }

  /**
   * Revisions are the bucket's sequence numbers: every write creates a higher one. A replica
   * whose `revision` is at least N has applied every change up to and including revision N.
   */
  #applied(revision: number): void {
    if (revision > this.#revision) this.#revision = revision;
  }

  /** The highest configuration revision this replica has applied (0: empty bucket). */
  get revision(): number {
    return this.#revision;
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

  /**
   * A destination, or a FAN_OUT destination's delivery target (`<id>~<i>`, topology's targetId):
   * a view of it with that one URL, the same object for as long as the record is (compiled
   * shaping is cached per object).
   */
  destination(id: string): DestinationRecord | undefined {
    const d = this.#destinations.get(id);
    if (d !== undefined) return d;
    if (this.#operatorTargets && isOperatorTarget(id)) return this.#targets.get(id);
    const t = splitTarget(id);
    if (t === undefined || t.urlIndex >= MAX_URLS) return undefined;
    const base = this.#destinations.get(t.destinationId);
    if (base === undefined) return undefined;
    let views = targetViews.get(base);
    if (views === undefined) {
      views = [];
      targetViews.set(base, views);
    }
    views[t.urlIndex] ??= targetView(base, id, t.urlIndex);
    return views[t.urlIndex];
  }

  destinations(): DestinationRecord[] {
    return [...this.#destinations.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /**
   * Destinations connected to a source (enabled or not), oldest first. Asked for every routed
   * call: kept per source until a destination changes. The array is shared; do not change it.
   */
  destinationsForSource(sourceId: string): readonly DestinationRecord[] {
    let list = this.#bySource.get(sourceId);
    if (!list) {
      const ids = this.#destinationIdsBySource.get(sourceId) ?? [];
      list = [...ids]
        .map((id) => this.#destinations.get(id))
        .filter((d): d is DestinationRecord => d !== undefined)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
      this.#bySource.set(sourceId, list);
    }
    return list;
  }

  operatorWebhook(id: string): OperatorWebhookRecord | undefined {
    return this.#operatorWebhooks.get(id);
  }

  /** Oldest first. */
  operatorWebhooks(): OperatorWebhookRecord[] {
    return [...this.#operatorWebhooks.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** The id of the key secrets are sealed with when written; undefined: stored in clear (no SECRETS_KEYS). */
  get encryptionKeyId(): string | undefined {
    return this.#keyring?.primary.id;
  }

  /**
   * Destinations whose secrets are not stored sealed with the newest key (in clear, or sealed with
   * an older key): what re-encryption rewrites. Empty without a keyring.
   */
  destinationsToReencrypt(): string[] {
    const newest = this.#keyring?.primary.id;
    if (newest === undefined) return [];
    return [...this.#sealedWith].filter(([, key]) => key !== newest).map(([id]) => id);
  }

  /** Like destinationsToReencrypt, for operator webhooks' secrets. */
  operatorWebhooksToReencrypt(): string[] {
    const newest = this.#keyring?.primary.id;
    if (newest === undefined) return [];
    return [...this.#operatorSealedWith].filter(([, key]) => key !== newest).map(([id]) => id);
  }

  // Writes: to KV, then applied locally at once so the writer reads its own write.

  /** Every write resolves to the configuration revision it created. */
  putSource(record: SourceRecord): Promise<number> {
    return this.#put(this.#sourceKind, record);
  }

  /**
   * Like putSource, but only when no source has this id. KV checks it, so two replicas
   * creating the same id at once cannot both succeed. Throws AlreadyExistsError.
   */
  createSource(record: SourceRecord): Promise<number> {
    return this.#create(this.#sourceKind, record);
  }

  deleteSource(id: string): Promise<number> {
    return this.#delete(this.#sourceKind, id);
  }

  putDestination(record: DestinationRecord): Promise<number> {
    return this.#put(this.#destinationKind, record);
  }

  /**
   * Read-modify-write of a destination, compare-and-set on the KV revision: `next` is written
   * only if the destination is still at the revision `change` was computed from; otherwise
   * `change` runs again on the newer record (at most MAX_CHANGE_ATTEMPTS times, then
   * ConflictError). So concurrent writers (admin calls on any ingest replica, auto-disable on any
   * dispatcher) are applied one after the other, never lost. `change` may throw to refuse
   * (nothing is written) and returns undefined to write nothing. Resolves to the revision written,
   * or undefined when the destination does not exist or nothing was written.
   */
  changeDestination(
    id: string,
    change: (current: DestinationRecord) => DestinationRecord | undefined,
  ): Promise<number | undefined> {
    return this.#change(this.#destinationKind, id, change);
  }

  /** Like changeDestination, for a source. */
  changeSource(
    id: string,
    change: (current: SourceRecord) => SourceRecord | undefined,
  ): Promise<number | undefined> {
    return this.#change(this.#sourceKind, id, change);
  }

  /** Like putDestination, but only when no destination has this id. Throws AlreadyExistsError. */
  createDestination(record: DestinationRecord): Promise<number> {
    return this.#create(this.#destinationKind, record);
  }

  deleteDestination(id: string): Promise<number> {
    return this.#delete(this.#destinationKind, id);
  }

  /** Like createDestination, for an operator webhook. Throws AlreadyExistsError. */
  createOperatorWebhook(record: OperatorWebhookRecord): Promise<number> {
    return this.#create(this.#operatorKind, record);
  }

  /** Like changeDestination (compare-and-set), for an operator webhook. */
  changeOperatorWebhook(
    id: string,
    change: (current: OperatorWebhookRecord) => OperatorWebhookRecord | undefined,
  ): Promise<number | undefined> {
    return this.#change(this.#operatorKind, id, change);
  }

  deleteOperatorWebhook(id: string): Promise<number> {
    return this.#delete(this.#operatorKind, id);
  }

  async #put<T extends { id: string }>(kind: Kind<T>, record: T): Promise<number> {
    const revision = await full(this.#kv.put(kind.prefix + record.id, kind.codec.encode(record)));
    this.#written(kind, record.id, record, revision);
    return revision;
  }

  async #create<T extends { id: string }>(kind: Kind<T>, record: T): Promise<number> {
    const key = kind.prefix + record.id;
    let revision: number;
    try {
      revision = await full(this.#kv.create(key, kind.codec.encode(record)));
    } catch (err) {
      if (isWrongLastSequence(err)) {
        throw new AlreadyExistsError(`${key} already exists`);
      }
      throw err;
    }
    this.#written(kind, record.id, record, revision);
    return revision;
  }

  async #change<T extends { id: string }>(
    kind: Kind<T>,
    id: string,
    change: (current: T) => T | undefined,
  ): Promise<number | undefined> {
    const key = kind.prefix + id;
    for (let attempt = 0; attempt < MAX_CHANGE_ATTEMPTS; attempt++) {
      const entry = await this.#kv.get(key);
      if (entry?.operation !== "PUT") return undefined;
      const next = change(kind.codec.decode(entry.json()));
      if (!next) return undefined;
      try {
        const revision = await full(this.#kv.update(key, kind.codec.encode(next), entry.revision));
        this.#written(kind, id, next, revision);
        return revision;
      } catch (err) {
        if (!isWrongLastSequence(err)) throw err;
      }
    }
    throw new ConflictError(
      `${key} kept changing during ${MAX_CHANGE_ATTEMPTS} attempts; nothing was written`,
    );
  }

  async #delete<T extends { id: string }>(kind: Kind<T>, id: string): Promise<number> {
    const key = kind.prefix + id;
    await full(this.#kv.delete(key));
    // delete() does not say its revision; the delete marker is the key's latest entry.
    const revision = (await this.#kv.get(key))?.revision ?? this.#revision;
    this.#applied(revision);
    kind.set(id, undefined, revision, undefined);
    return revision;
  }

  /** A write applied here at once, so the writer reads its own write (sealed with the primary key, if any). */
  #written<T extends { id: string }>(kind: Kind<T>, id: string, record: T, revision: number): void {
    this.#applied(revision);
    kind.set(id, record, revision, this.#keyring?.primary.id);
  }

  close(): void {
    this.#closed = true;
    this.#advisories?.unsubscribe();
    this.#stop?.();
    this.#stop = undefined;
  }
}

/** A write refused because the bucket is full: counted, and RESOURCE_EXHAUSTED for the caller. */
async function full<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (err) {
    if (countIfFull(kvStream(CONFIG_BUCKET), err)) throw natsFailure("the configuration bucket is full", err);
    throw err;
  }
}
