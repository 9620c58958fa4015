import type { JetStreamManager, StoredMsg } from "nats";
import {
  ATTEMPTS_STREAM,
  type AttemptRecord,
  attemptSubject,
  type LogRecord,
  messageHash,
  routedSubject,
  type Stored,
} from "./record.js";

export interface AttemptQuery {
  /** Only this destination (subject filter). */
  destinationId?: string;
  /** Only this message (subject filter on its hash, then the exact id). */
  messageId?: string;
  failedOnly?: boolean;
  /** Only attempts that started at or after this time (ms). */
  sinceMs?: number;
  pageSize: number;
  /** Only records with a smaller sequence (the page token). */
  beforeSequence?: number;
}

export interface AttemptPage {
  attempts: Stored<AttemptRecord>[];
  /** Where the next (older) page starts; undefined when there is none. */
  nextBefore?: number;
}

/** Lookups one query may make; a page may come back short (with a token) rather than run long. */
const LOOKUP_BUDGET = 20_000;
const FIRST_WINDOW = 256;
const MAX_WINDOW = 1 << 20;
/** Records of one message at most (attempts of every destination, routing, dead letters). */
const MESSAGE_RECORDS_MAX = 2000;
/** Routed records looked at per message for its body (more than one only on a hash collision). */
const ROUTED_LOOKUPS_PER_MESSAGE = 4;
/** Body lookups of one page in flight at once. */
const BODY_LOOKUPS_IN_FLIGHT = 32;
const decoder = new TextDecoder();

/**
 * Reads the attempt log. Everything is "next message on this subject filter from sequence N"
 * lookups, which the server answers from its subject index: no consumer is created, nothing is
 * left behind, and a query touches only the records its filter matches.
 *
 * Newest first over a forward-only lookup: the query scans windows of sequences just below the
 * cursor, growing the window (x8) while it finds too few, so a dense filter costs about one
 * page and a sparse one a few windows.
 */
export class AttemptReader {
  readonly #jsm: JetStreamManager;

  constructor(jsm: JetStreamManager) {
    this.#jsm = jsm;
  }

  async list(q: AttemptQuery): Promise<AttemptPage> {
    const state = (await this.#jsm.streams.info(ATTEMPTS_STREAM)).state;
    const filter = attemptSubject(q.destinationId || "*", q.messageId ? messageHash(q.messageId) : "*");
    const wanted = (r: LogRecord): r is AttemptRecord =>
      r.kind === "attempt" &&
      (!q.messageId || r.messageId === q.messageId) &&
      (!q.failedOnly || r.outcome !== "success");
    const out: Stored<AttemptRecord>[] = [];
    let hi = Math.min(q.beforeSequence ?? Number.MAX_SAFE_INTEGER, state.last_seq + 1);
    let window = Math.max(FIRST_WINDOW, q.pageSize * 4);
    const budget = { left: LOOKUP_BUDGET };
    while (hi > state.first_seq && budget.left > 0) {
      const lo = Math.max(state.first_seq, hi - window);
      const chunk = await this.#scan(filter, lo, hi, budget);
      if (chunk === undefined) return { attempts: out, nextBefore: hi };
      let older = false;
      for (const m of chunk.reverse()) {
        const r = parse(m);
        if (q.sinceMs !== undefined && r.kind === "attempt" && Date.parse(r.startTime) < q.sinceMs) {
          // The log is in time order: everything further back is older still.
          older = true;
          break;
        }
        if (!wanted(r)) continue;
        out.push(r);
        if (out.length === q.pageSize) {
          return { attempts: out, ...(r.sequence > state.first_seq ? { nextBefore: r.sequence } : {}) };
        }
      }
      if (older) return { attempts: out };
      hi = lo;
      window = Math.min(MAX_WINDOW, window * 8);
    }
    return hi > state.first_seq ? { attempts: out, nextBefore: hi } : { attempts: out };
  }

  /** Every record about one message (routing, attempts, dead letters), oldest first. */
  async forMessage(messageId: string): Promise<Stored[]> {
    const hash = messageHash(messageId);
    const budget = { left: MESSAGE_RECORDS_MAX };
    const found = [
      ...((await this.#scan(routedSubject(hash), 0, Number.MAX_SAFE_INTEGER, budget)) ?? []),
      ...((await this.#scan(attemptSubject("*", hash), 0, Number.MAX_SAFE_INTEGER, budget)) ?? []),
    ];
    return found
      .map(parse)
      .filter((r) => r.messageId === messageId)
      .sort((a, b) => a.sequence - b.sequence);
  }

  /**
   * The request body of each message, from its routed record (the bytes every destination was
   * sent). A message whose routed record is gone (aged out, or not written) or was stored
   * without its body (ATTEMPT_LOG_BODIES=off) is absent from the map.
   */
  async requestBodies(messageIds: Iterable<string>): Promise<Map<string, string>> {
    const ids = [...new Set(messageIds)];
    const out = new Map<string, string>();
    const one = async (id: string) => {
      const subject = routedSubject(messageHash(id));
      // The first routed record of the message; a hash collision only adds a record to skip.
      let seq = 1;
      for (let left = ROUTED_LOOKUPS_PER_MESSAGE; left > 0; left--) {
        const m = await this.#next(subject, seq);
        if (!m) return;
        const r = parse(m);
        if (r.kind === "routed" && r.messageId === id) {
          if (r.body !== undefined) out.set(id, r.body);
          return;
        }
        seq = m.seq + 1;
      }
    };
    for (let i = 0; i < ids.length; i += BODY_LOOKUPS_IN_FLIGHT) {
      await Promise.all(ids.slice(i, i + BODY_LOOKUPS_IN_FLIGHT).map(one));
    }
    return out;
  }

  /** Messages on `filter` with lo <= seq < hi, oldest first; undefined when the budget ran out. */
  async #scan(
    filter: string,
    lo: number,
    hi: number,
    budget: { left: number },
  ): Promise<StoredMsg[] | undefined> {
    const out: StoredMsg[] = [];
    let seq = Math.max(1, lo);
    while (seq < hi) {
      if (budget.left-- <= 0) return undefined;
      const m = await this.#next(filter, seq);
      if (!m || m.seq >= hi) break;
      out.push(m);
      seq = m.seq + 1;
    }
    return out;
  }

  async #next(filter: string, seq: number): Promise<StoredMsg | undefined> {
    try {
      const query = { seq, next_by_subj: filter } as unknown as { seq: number };
      return await this.#jsm.streams.getMessage(ATTEMPTS_STREAM, query);
    } catch (err) {
      if (/no message found|not found/i.test((err as Error).message)) return undefined;
      throw err;
    }
  }
}

export function parse(m: StoredMsg): Stored {
  return { ...(JSON.parse(decoder.decode(m.data)) as LogRecord), sequence: m.seq };
}
