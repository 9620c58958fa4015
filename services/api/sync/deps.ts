import type { StoredCall } from "@hookpost/contract";
import type { ConfigStore, DeletionStore, Logger, MembershipStore, UserSourceIndex } from "@hookpost/core";
import type { NatsConnection } from "nats";

/**
 * Stores a call on the EVENTS stream (subject `eventSubject(sourceId, type)`, header
 * `Nats-Msg-Id: <sourceId>:<messageId>`) and resolves once JetStream confirmed it. Rejects with
 * a HookpostError (UNAVAILABLE, RESOURCE_EXHAUSTED) otherwise. The ingest's EventPublisher#publish
 * fits; `jetStreamPublisher` (publish.ts) is the built-in one. `json`, when given, is
 * `JSON.stringify(call)` already rendered (the syncs render it from templates); a publisher may
 * use it instead of serialising again.
 */
export type PublishCall = (call: StoredCall, json?: string) => Promise<void>;

/** What the sync and deletion handlers need from the ingest service. */
export interface SyncDeps {
  nc: NatsConnection;
  log: Logger;
  memberships: MembershipStore;
  /** When set, every user who gets an identify call is recorded for deletion requests. */
  index?: UserSourceIndex;
  /** Defaults to a direct JetStream publish (publish.ts). */
  publish?: PublishCall;
  /** Folder for spilled sort runs; default os.tmpdir(). */
  tmpDir?: string;
  /**
   * Identify calls awaiting their PubAck at once; default 256 (as fast as more on one server,
   * and live calls queue behind at most this many sync publishes).
   */
  maxInFlight?: number;
  /** A sort run is spilled to disk after this many ids (default 50 000) ... */
  runEntries?: number;
  /** ... or this many bytes of ids and values in memory (default 16 MiB). */
  runBytes?: number;
  /** PubAck timeout of the built-in publisher; default 5 000 ms. */
  publishTimeoutMs?: number;
  /** Clock (tests). */
  now?: () => Date;
  /** SOURCE_MAX_MEMBERSHIP_BYTES: what one source's stored memberships may take; absent: no limit. */
  maxMembershipBytes?: number | undefined;
}

export interface DeleteDeps {
  nc: NatsConnection;
  config: ConfigStore;
  log: Logger;
  index: UserSourceIndex;
  /** Where the request is recorded for erasure and GetDeletion. */
  deletions: DeletionStore;
  /** Told once the request is recorded (the local erasure worker looks sooner). */
  onRequested?: () => void;
  publish?: PublishCall;
  publishTimeoutMs?: number;
  now?: () => Date;
}

/** Per-call options of the streaming handlers. */
export interface SyncOptions {
  /** Aborts the sync (client cancelled): nothing more is published and the membership is kept. */
  signal?: AbortSignal;
}
