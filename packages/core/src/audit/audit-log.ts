import { ADMIN_PAGE_MAX_BYTES, answerBytes, PageBudget } from "@hookpost/contract";
import type { JetStreamClient, JetStreamManager, NatsConnection, StoredMsg } from "nats";
import { isNotFound } from "../nats/jetstream-errors.js";
import {
  AUDIT_STREAM,
  AUDIT_USAGE_PREFIX,
  auditOutcomeSubject,
  auditRequestSubject,
  auditUsageSubject,
} from "../nats/topology.js";
import type { AuditEntry, AuditOutcomeRecord, AuditRequestRecord, AuditStoredRecord } from "./record.js";

export interface AuditQuery {
  pageSize: number;
  /** Only calls recorded before this sequence (the page token); absent: from the newest. */
  beforeSequence?: number;
  /** Only calls about this resource (asked for, or changed by the call). */
  resourceId?: string;
  /** The page stops before exceeding this many answer bytes. */
  maxBytes?: number;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Where the next (older) page starts; undefined when there is none. */
  nextBefore?: number;
}

/** Records one page looks at, at most (a resource filter skips the others'). */
const PAGE_LOOKUPS = 20_000;
/** Records read at once. */
const READ_AHEAD = 16;
const decoder = new TextDecoder();

/** Bytes an entry adds to an answer. */
export function auditEntryBytes(e: AuditEntry): number {
  return answerBytes(JSON.stringify(e.request), e.outcome ? JSON.stringify(e.outcome) : "");
}

/**
 * The audit log on the AUDIT stream. Appends only: the stream denies deletes and purges, so the
 * one way a record leaves is its age (AUDIT_LOG_MAX_AGE). With no deletes the stream's
 * sequences are dense, so a page is read newest first by sequence, without a consumer.
 */
export class AuditLog {
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;

  private constructor(js: JetStreamClient, jsm: JetStreamManager) {
    this.#js = js;
    this.#jsm = jsm;
  }

  static async open(nc: NatsConnection): Promise<AuditLog> {
    return new AuditLog(nc.jetstream(), await nc.jetstreamManager());
  }

  /**
   * Stores a record; resolves once JetStream has it. The message id makes a retried append of
   * the same record store it once. `chargeTo`: the source whose share of the log it takes (a
   * portal link's write), marked beside it (see `usage`). Resolves with the bytes charged (0
   * without `chargeTo`).
   */
  async append(record: AuditStoredRecord, chargeTo?: string): Promise<number> {
    const subject =
      record.kind === "request" ? auditRequestSubject(record.auditId) : auditOutcomeSubject(record.auditId);
    const data = JSON.stringify(record);
    await this.#js.publish(subject, data, {
      msgID: `audit:${record.kind}:${record.auditId}`,
      expect: { streamName: AUDIT_STREAM },
    });
    if (chargeTo === undefined) return 0;
    // Only once the record is stored: AUDIT refuses what does not fit (discard new), and a mark
    // (a few bytes) may fit where its record did not. A mark lost here under-charges one record;
    // the record is stored, so the append stands.
    const kib = sizeClassKib(Buffer.byteLength(data));
    await this.#js
      .publish(auditUsageSubject(chargeTo, kib), undefined, {
        msgID: `audit-usage:${record.kind}:${record.auditId}`,
        expect: { streamName: AUDIT_STREAM },
      })
      .catch(() => {});
    return kib * 1024;
  }

  /** Bytes on the log charged to each source (its portal links' records), from the marks' counts. */
  async usage(): Promise<Map<string, number>> {
    const info = await this.#jsm.streams.info(AUDIT_STREAM, { subjects_filter: `${AUDIT_USAGE_PREFIX}>` });
    const out = new Map<string, number>();
    for (const [subject, count] of Object.entries(info.state.subjects ?? {})) {
      const [sourceId, kib] = subject.slice(AUDIT_USAGE_PREFIX.length).split(".");
      if (sourceId === undefined || !Number(kib)) continue;
      out.set(sourceId, (out.get(sourceId) ?? 0) + count * Number(kib) * 1024);
    }
    return out;
  }

  /** One page of calls, newest first, each joined with its outcome. */
  async page(q: AuditQuery): Promise<AuditPage> {
    const state = (await this.#jsm.streams.info(AUDIT_STREAM)).state;
    if (state.messages === 0) return { entries: [] };
    const first = Math.max(1, state.first_seq);
    const budget = new PageBudget(q.maxBytes ?? ADMIN_PAGE_MAX_BYTES);
    const entries: AuditEntry[] = [];
    // Outcomes come after their requests: read first, going back, and joined when it is reached.
    const outcomes = new Map<string, AuditOutcomeRecord>();
    let seq = Math.min(q.beforeSequence ?? Number.MAX_SAFE_INTEGER, state.last_seq + 1) - 1;
    for (let looked = 0; seq >= first && looked < PAGE_LOOKUPS; ) {
      const from = Math.max(first, seq - READ_AHEAD + 1);
      const batch = await Promise.all(
        Array.from({ length: seq - from + 1 }, (_, i) => this.#get({ seq: seq - i })),
      );
      for (const m of batch) {
        looked++;
        seq--;
        // Marks (usage) are no records.
        if (!m || m.subject.startsWith(AUDIT_USAGE_PREFIX)) continue;
        const record = parse(m);
        if (record.kind === "outcome") {
          outcomes.set(record.auditId, record);
          continue;
        }
        const outcome = outcomes.get(record.auditId) ?? (await this.#outcomeOf(record.auditId));
        outcomes.delete(record.auditId);
        const entry: AuditEntry = { sequence: m.seq, request: record, ...(outcome ? { outcome } : {}) };
        if (!about(entry, q.resourceId)) continue;
        const bytes = auditEntryBytes(entry);
        // Full by size: the next page starts with this entry.
        if (!budget.fits(bytes)) return { entries, nextBefore: m.seq + 1 };
        budget.add(bytes);
        entries.push(entry);
        if (entries.length === q.pageSize) {
          return m.seq > first ? { entries, nextBefore: m.seq } : { entries };
        }
      }
    }
    return seq >= first ? { entries, nextBefore: seq + 1 } : { entries };
  }

  async #outcomeOf(auditId: string): Promise<AuditOutcomeRecord | undefined> {
    const m = await this.#get({ last_by_subj: auditOutcomeSubject(auditId) });
    const record = m ? parse(m) : undefined;
    return record?.kind === "outcome" ? record : undefined;
  }

  async #get(query: { seq: number } | { last_by_subj: string }): Promise<StoredMsg | undefined> {
    try {
      return await this.#jsm.streams.getMessage(AUDIT_STREAM, query);
    } catch (err) {
      // Aged out meanwhile, or (outcomes) never stored.
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

function about(e: AuditEntry, resourceId: string | undefined): boolean {
  if (!resourceId) return true;
  return (
    e.request.resourceId === resourceId ||
    e.outcome?.resourceId === resourceId ||
    (e.outcome?.changes.some((c) => c.resourceId === resourceId) ?? false)
  );
}

/** A record's size, rounded up to a power of two KiB (at least 1): never under-charged. */
function sizeClassKib(bytes: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, Math.ceil(bytes / 1024))));
}

function parse(m: StoredMsg): AuditStoredRecord {
  return JSON.parse(decoder.decode(m.data)) as AuditRequestRecord | AuditOutcomeRecord;
}
