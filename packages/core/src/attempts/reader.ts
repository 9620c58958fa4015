import { answerBytes, PageBudget } from "@hookpost/contract";
import type { StoredMsg } from "nats";
import type { AttemptRecord, LogRecord, Stored } from "./record.js";
import { STATUS } from "./search/entries.js";
import { type AttemptSearch, RECORD_DONE } from "./search/search.js";

export interface AttemptQuery {
  /** Only this destination (subject filter). */
  destinationId?: string;
  /** Only this message (subject filter on its hash, then the exact id). */
  messageId?: string;
  /** Only calls from this source (a message is identified by source and message id). */
  sourceId?: string;
  failedOnly?: boolean;
  /** Only attempts that started at or after this time (ms). */
  sinceMs?: number;
  pageSize: number;
  /** Only records with a smaller sequence (the page token). */
  beforeSequence?: number;
  /** The page stops before exceeding this many answer bytes (request bodies included). */
  maxBytes?: number;
}

export interface AttemptPage {
  /** Each with `requestBody` joined from its call's routed record when the log has it. */
  attempts: Stored<AttemptRecord>[];
  /** Where the next (older) page starts; undefined when there is none. */
  nextBefore?: number;
}

/** Every record about one message of one source, oldest first. */
export interface MessageRecords {
  records: Stored[];
  /** Older records were left out to bound memory (the newest are kept). */
  truncated: boolean;
}

/** Body lookups of one page in flight at once. */
const BODY_LOOKUPS_IN_FLIGHT = 16;
const decoder = new TextDecoder();

/** Bytes an attempt adds to an answer: its strings, bodies included. */
export function attemptBytes(r: AttemptRecord): number {
  return answerBytes(
    r.messageId,
    r.destinationId,
    r.sourceId,
    r.url,
    r.reason,
    r.responseBody,
    r.requestBody ?? "",
  );
}

/** (source, message) → the routed records of that call: sequence and body. */
type RoutedBodies = Map<string, { seq: number; body: string | undefined }[]>;
const callKey = (sourceId: string, messageId: string) => `${sourceId}\n${messageId}`;

/**
 * ListAttempts and GetMessage over the attempt log, through its search index
 * (search/search.ts): attempts of a destination, a source or a message, newest first, and every
 * record about one message. Records written before issue 28 (other subjects) are indexed too.
 */
export class AttemptReader {
  readonly #search: AttemptSearch;

  constructor(search: AttemptSearch) {
    this.#search = search;
  }

  get search(): AttemptSearch {
    return this.#search;
  }

  async list(q: AttemptQuery): Promise<AttemptPage> {
    const routed: RoutedBodies = new Map();
    const page = await this.#search.search(
      {
        kinds: ["attempt"],
        ...(q.destinationId ? { destinationId: q.destinationId } : {}),
        ...(q.messageId ? { messageId: q.messageId } : {}),
        ...(q.sourceId ? { sourceId: q.sourceId } : {}),
        ...(q.failedOnly ? { statuses: [STATUS.failed, STATUS.filteredAtAttempt] } : {}),
        ...(q.sinceMs !== undefined ? { sinceMs: q.sinceMs } : {}),
      },
      {
        pageSize: q.pageSize,
        ...(q.beforeSequence !== undefined ? { after: { seq: q.beforeSequence, k: RECORD_DONE } } : {}),
        // Cut by bytes below, once bodies are joined.
      },
    );
    const attempts = page.hits.map((h) => h.record as Stored<AttemptRecord>);
    const budget = new PageBudget(q.maxBytes);
    const out: Stored<AttemptRecord>[] = [];
    for (let i = 0; i < attempts.length; i += BODY_LOOKUPS_IN_FLIGHT) {
      const batch = attempts.slice(i, i + BODY_LOOKUPS_IN_FLIGHT);
      await this.#joinBodies(batch, routed);
      for (const r of batch) {
        const bytes = attemptBytes(r);
        // Full by size: the next page starts with this record.
        if (!budget.fits(bytes)) return { attempts: out, nextBefore: r.sequence + 1 };
        budget.add(bytes);
        out.push(r);
      }
    }
    // An attempt is one entry: a cursor past it (k >= 0) continues below it, else with it.
    const next = page.next;
    if (next === undefined) return { attempts: out };
    return { attempts: out, nextBefore: next.k >= 0 ? next.seq : next.seq + 1 };
  }

  /**
   * Every record about one message (routing, attempts, dead letters), oldest first; only the
   * given source's when `sourceId` is set. At most 2 000 (the newest).
   */
  async forMessage(messageId: string, sourceId?: string): Promise<MessageRecords> {
    return this.#search.forMessage(messageId, sourceId);
  }

  /**
   * Sets `requestBody` of attempts that do not carry it, from the routed record of the same
   * call: same source and message id. The router and the dispatcher write without waiting, so an
   * attempt may be stored before its routed record: the body is the newest routed before the
   * attempt, else the first after it (a source that sends an id again after the dedup window has
   * several). A call whose routed record is gone (aged out) or was stored without its body
   * (ATTEMPT_LOG_BODIES=off) keeps none.
   */
  async #joinBodies(attempts: Stored<AttemptRecord>[], routed: RoutedBodies): Promise<void> {
    const need = attempts.filter((a) => a.requestBody === undefined);
    const calls = new Map(need.map((a) => [callKey(a.sourceId, a.messageId), a]));
    await Promise.all(
      [...calls.entries()]
        .filter(([key]) => !routed.has(key))
        .map(async ([key, a]) => {
          const found = await this.#search.routedOf(a.sourceId, a.messageId, { seq: a.sequence });
          routed.set(
            key,
            found.map((r) => ({ seq: r.sequence, body: r.body })),
          );
        }),
    );
    for (const a of need) {
      const found = routed.get(callKey(a.sourceId, a.messageId)) ?? [];
      const body = (found.findLast((c) => c.seq < a.sequence) ?? found[0])?.body;
      if (body !== undefined) a.requestBody = body;
    }
  }
}

export function parse(m: StoredMsg): Stored {
  return { ...(JSON.parse(decoder.decode(m.data)) as LogRecord), sequence: m.seq };
}
