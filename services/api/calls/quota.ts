import { Code, HookpostError } from "@hookpost/contract";
import type { ConfigStore, Logger } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  destinationOfSubject,
  EVENT_SUBJECT_PREFIX,
  EVENTS_STREAM,
  type TopologySettings,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { orderedPending } from "../admin/pending.js";
import type { Published } from "./publish.js";

/** Per-source limits of ingest (README "Per-source quotas"). */
export interface SourceQuotaSettings {
  /** SOURCE_MAX_PENDING_BYTES: bytes of one source's calls still on EVENTS or DELIVERIES. */
  maxPendingBytes: number;
  /** SOURCE_MAX_RATE: calls per second one source may send to one ingest replica. */
  maxRate: number;
  /** SOURCE_MAX_BURST: calls above the rate one source may send at once (token bucket size). */
  burst: number;
  /** SOURCE_QUOTA_REFRESH: how often the pending bytes are read from JetStream. */
  refreshMs: number;
  /**
   * SOURCE_MAX_USERS: users one source may have in the user index (kept there by the index,
   * core's UserSourceIndex); absent: no limit.
   */
  maxUsers?: number;
  /** SOURCE_MAX_MEMBERSHIP_BYTES: bytes of one source's stored memberships (syncs); absent: no limit. */
  maxMembershipBytes?: number;
  /** SOURCE_MAX_AUDIT_BYTES: bytes of the audit log one source's portal links may take; absent: no limit. */
  maxAuditBytes?: number;
}

/**
 * The default users and memberships quotas are this fraction of their store. Both stay for the
 * life of their source (deletions aside), so a source's share is larger than its pending share.
 */
const LASTING_SHARE = 4;
/** What one (user, source) pair takes in the index, for the default users quota (measured: 173 B with 10-character user ids, 213 B with 40). */
const USER_PAIR_BYTES = 200;

/** Ceiling of the default pending quota. */
const DEFAULT_MAX_PENDING_BYTES = 64 * 1024 ** 2;
/**
 * The default quota is at most this fraction of the smaller of EVENTS and DELIVERIES: one
 * source at its quota (plus what the approximation lets through) leaves the streams mostly free.
 */
const STREAM_SHARE = 16;

export function defaultSourceQuota(t: TopologySettings): SourceQuotaSettings {
  const share = Math.floor(Math.min(t.eventsMaxBytes, t.deliveriesMaxBytes) / STREAM_SHARE);
  return {
    maxPendingBytes: Math.max(1, Math.min(DEFAULT_MAX_PENDING_BYTES, share)),
    maxRate: 10_000,
    burst: 20_000,
    refreshMs: 1_000,
    maxUsers: Math.max(1, Math.floor(t.userIndexMaxBytes / LASTING_SHARE / USER_PAIR_BYTES)),
    maxMembershipBytes: Math.max(1, Math.floor(t.membershipsMaxBytes / LASTING_SHARE)),
    maxAuditBytes: Math.max(1, Math.floor(t.auditLogMaxBytes / STREAM_SHARE)),
  };
}

/** Told to a source over its pending quota: nothing tells when its calls will be delivered. */
const PENDING_RETRY_AFTER_MS = 5_000;
/** A refresh takes at most 1/REFRESH_SHARE of a replica's time (here 5 %). */
const REFRESH_SHARE = 20;
/** Weight of the latest batch in a source's average call size. */
const SIZE_WEIGHT = 0.2;
/** A refused source is logged at most this often. */
const WARN_EVERY_MS = 60_000;

export type QuotaLimit = "pending_bytes" | "rate" | "users";

/**
 * The per-source quotas, checked before a call is published:
 * - pending bytes: read every `refreshMs` from JetStream (one stream info with per-subject
 *   counts on EVENTS, whose subjects carry the source id, and one on DELIVERIES and on ORDERED,
 *   whose subjects carry the destination id, charged to every source of that destination), times the source's
 *   average stored call as this replica saw it (else the stream's average message), plus what
 *   this replica stored after the last EVENTS sequence that figure holds. No JetStream request
 *   per call.
 * - rate: a token bucket per source in this replica.
 */
export class SourceQuota {
  readonly #s: SourceQuotaSettings;
  readonly #jsm: JetStreamManager;
  readonly #store: ConfigStore;
  readonly #log: Logger;
  readonly #onRefused: (limit: QuotaLimit) => void;
  /** Pending bytes per source as of the last refresh. */
  #snapshot = new Map<string, number>();
  /**
   * What this replica stored that the last figure may not hold: batches by EVENTS sequence, and
   * their bytes per source. A refresh drops the batches at or below the sequence it read, so a
   * call is counted once, never in both (which refused sources under their quota) or in neither.
   */
  #recent: Array<{ sourceId: string; bytes: number; seq: number }> = [];
  #recentBytes = new Map<string, number>();
  /** Average size of each source's calls stored here (moving average). */
  readonly #callBytes = new Map<string, number>();
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #warned = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #stop: () => void = () => {};
  #refreshing: Promise<void> | undefined;

  constructor(
    settings: SourceQuotaSettings,
    deps: { jsm: JetStreamManager; store: ConfigStore; log: Logger; onRefused?: (limit: QuotaLimit) => void },
  ) {
    this.#s = settings;
    this.#jsm = deps.jsm;
    this.#store = deps.store;
    this.#log = deps.log;
    this.#onRefused = deps.onRefused ?? (() => {});
  }

  /**
   * Reads the pending bytes now, then every refreshMs, or less often when a refresh is slow
   * (thousands of destinations with a backlog): it takes at most 1/REFRESH_SHARE of the time.
   */
  async start(): Promise<void> {
    let closed = false;
    const loop = async () => {
      const started = performance.now();
      await this.refresh();
      if (closed) return;
      const wait = Math.max(this.#s.refreshMs, (performance.now() - started) * REFRESH_SHARE);
      this.#timer = setTimeout(() => void loop(), wait);
      this.#timer.unref();
    };
    this.#stop = () => {
      closed = true;
      clearTimeout(this.#timer);
    };
    await loop();
  }

  close(): void {
    this.#stop();
  }

  /** SOURCE_MAX_MEMBERSHIP_BYTES (the syncs check it when they start and before they store). */
  get maxMembershipBytes(): number | undefined {
    return this.#s.maxMembershipBytes;
  }

  /** Bytes of the source's calls not yet finished, as far as this replica knows. */
  pendingBytes(sourceId: string): number {
    return (this.#snapshot.get(sourceId) ?? 0) + (this.#recentBytes.get(sourceId) ?? 0);
  }

  /**
   * Throws RESOURCE_EXHAUSTED (with the delay to wait) when the source is over a quota; else
   * takes `calls` from its rate bucket. A batch larger than the burst passes on a full bucket.
   */
  admit(sourceId: string, calls: number): void {
    this.#checkPending(sourceId, "the call was not stored");
    const now = performance.now();
    const b = this.#buckets.get(sourceId) ?? { tokens: this.#s.burst, at: now };
    b.tokens = Math.min(this.#s.burst, b.tokens + ((now - b.at) * this.#s.maxRate) / 1000);
    b.at = now;
    this.#buckets.set(sourceId, b);
    const need = Math.min(calls, this.#s.burst);
    if (b.tokens < need) {
      const waitMs = ((need - b.tokens) * 1000) / this.#s.maxRate;
      this.#refuse(
        sourceId,
        "rate",
        waitMs,
        `source ${sourceId} sends more than ${this.#s.maxRate} calls/s (SOURCE_MAX_RATE, burst ` +
          `${this.#s.burst}): the call was not stored; retry in ${Math.ceil(waitMs)} ms`,
      );
    }
    b.tokens -= calls;
  }

  /**
   * For calls stored one by one after a request was admitted (a sync's identify calls, charged
   * with `stored` as they are stored): throws RESOURCE_EXHAUSTED once the source is over its
   * pending quota, so that one request cannot store past it (and fill EVENTS for every source).
   */
  checkPending(sourceId: string): void {
    this.#checkPending(
      sourceId,
      "the sync stopped before storing all its calls and the stored membership is unchanged " +
        "(a retry does not store again the calls already stored)",
    );
  }

  #checkPending(sourceId: string, outcome: string): void {
    const pending = this.pendingBytes(sourceId);
    if (pending < this.#s.maxPendingBytes) return;
    this.#refuse(
      sourceId,
      "pending_bytes",
      PENDING_RETRY_AFTER_MS,
      `source ${sourceId} has ${Math.round(pending)} bytes of calls not yet delivered, its quota is ` +
        `${this.#s.maxPendingBytes} (SOURCE_MAX_PENDING_BYTES): ${outcome}; retry ` +
        "later, once its destinations took what is pending",
    );
  }

  /** Counts `calls` this replica stored for the source (`bytes` in all, up to EVENTS sequence `seq`). */
  stored(sourceId: string, { bytes, seq }: Published, calls: number): void {
    if (bytes <= 0 || calls <= 0) return;
    this.#recent.push({ sourceId, bytes, seq });
    this.#recentBytes.set(sourceId, (this.#recentBytes.get(sourceId) ?? 0) + bytes);
    const avg = this.#callBytes.get(sourceId);
    const size = bytes / calls;
    this.#callBytes.set(sourceId, avg === undefined ? size : avg + (size - avg) * SIZE_WEIGHT);
  }

  /** Reads the pending bytes per source from JetStream (one refresh at a time). */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #refresh(): Promise<void> {
    try {
      const [events, deliveries, ordered] = await Promise.all([
        this.#jsm.streams.info(EVENTS_STREAM, { subjects_filter: `${EVENT_SUBJECT_PREFIX}>` }),
        // Every subject: partitions, lanes and legacy subjects all name their destination.
        this.#jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: ">" }),
        // A PER_USER destination's calls wait there, not on DELIVERIES.
        orderedPending(this.#jsm, () =>
          this.#store
            .destinations()
            .filter((d) => d.ordering === "PER_USER")
            .map((d) => d.id),
        ),
      ]);
      const next = new Map<string, number>();
      const add = (id: string, bytes: number) => next.set(id, (next.get(id) ?? 0) + bytes);
      // JetStream counts messages per subject, not bytes: a source's calls weigh what this
      // replica saw them weigh, else the stream's average message.
      const size = (sourceId: string, streamAverage: number) =>
        this.#callBytes.get(sourceId) ?? streamAverage;
      const avgEvent = average(events.state);
      for (const [subject, count] of Object.entries(events.state.subjects ?? {})) {
        const sourceId = subject.slice(
          EVENT_SUBJECT_PREFIX.length,
          subject.indexOf(".", EVENT_SUBJECT_PREFIX.length),
        );
        add(sourceId, count * size(sourceId, avgEvent));
      }
      // A shared destination's backlog counts against each of its sources: never under-counted.
      const charge = (id: string | undefined, count: number, streamAverage: number) => {
        const destination = id === undefined ? undefined : this.#store.destination(id);
        for (const sourceId of destination?.sourceIds ?? [])
          add(sourceId, count * size(sourceId, streamAverage));
      };
      const avgDelivery = average(deliveries.state);
      for (const [subject, count] of Object.entries(deliveries.state.subjects ?? {}))
        charge(destinationOfSubject(subject), count, avgDelivery);
      for (const [id, count] of ordered.counts) charge(id, count, ordered.averageBytes);
      this.#snapshot = next;
      this.#forget(events.state.last_seq);
    } catch (err) {
      // Keep the last figure and keep counting what is stored here: the next refresh catches up.
      this.#log.warn({ err: (err as Error).message }, "cannot read pending bytes per source; retrying");
    }
  }

  /** Drops the batches the figure just read holds (a batch that straddles it stays: an over-count of one batch). */
  #forget(lastSeq: number): void {
    const kept = this.#recent.filter((r) => r.seq > lastSeq);
    this.#recent = kept;
    this.#recentBytes = new Map();
    for (const r of kept)
      this.#recentBytes.set(r.sourceId, (this.#recentBytes.get(r.sourceId) ?? 0) + r.bytes);
  }

  #refuse(sourceId: string, limit: QuotaLimit, retryAfterMs: number, message: string): never {
    this.#onRefused(limit);
    const now = Date.now();
    if (now - (this.#warned.get(`${limit}:${sourceId}`) ?? 0) >= WARN_EVERY_MS) {
      this.#warned.set(`${limit}:${sourceId}`, now);
      this.#log.warn({ sourceId, limit }, "source over its quota: refusing its calls");
    }
    throw new HookpostError(Code.RESOURCE_EXHAUSTED, message, [], { retryAfterMs });
  }
}

function average(state: { bytes: number; messages: number }): number {
  return state.messages === 0 ? 0 : state.bytes / state.messages;
}
