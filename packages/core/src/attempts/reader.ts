import { answerBytes, PageBudget } from "@hookpost/contract";
import type { JetStreamManager, StoredMsg } from "nats";
import { isNotFound } from "../nats/jetstream-errors.js";
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

/** Lookups one query may make; a page may come back short (with a token) rather than run long. */
const LOOKUP_BUDGET = 20_000;
const FIRST_WINDOW = 256;
const MAX_WINDOW = 1 << 20;
/** Raw record bytes one scan keeps in memory; beyond it the oldest are dropped (and re-read later). */
const SCAN_MAX_BYTES = 4 * 1024 * 1024;
/** Records of one message at most (attempts of every destination, routing, dead letters). */
const MESSAGE_RECORDS_MAX = 2000;
/**
 * Routed records looked at per message id for a body: one per source that used the id (and per
 * resend after the dedup window), plus hash collisions.
 */
const ROUTED_LOOKUPS_PER_MESSAGE = 16;
/** Body lookups of one page in flight at once (also the most bodies read past a full page). */
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

/** (source, message) → the routed records of that call seen so far: sequence and body. */
type RoutedBodies = Map<string, { seq: number; body: string | undefined }[]>;
const callKey = (sourceId: string, messageId: string) => `${sourceId}\n${messageId}`;

/**
 * Reads the attempt log. Everything is "next message on this subject filter from sequence N"
 * lookups, which the server answers from its subject index: no consumer is created, nothing is
 * left behind, and a query touches only the records its filter matches.
 *
 * Newest first over a forward-only lookup: the query scans windows of sequences just below the
 * cursor, growing the window (x8) while it finds too few, so a dense filter costs about one
 * page and a sparse one a few windows. Memory per query is bounded: a window keeps at most
 * SCAN_MAX_BYTES of records, and bodies are joined a few at a time while the page has room.
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
      (!q.sourceId || r.sourceId === q.sourceId) &&
      (!q.failedOnly || r.outcome !== "success");
    const out: Stored<AttemptRecord>[] = [];
    const page = new PageBudget(q.maxBytes);
    const routed: RoutedBodies = new Map();
    let hi = Math.min(q.beforeSequence ?? Number.MAX_SAFE_INTEGER, state.last_seq + 1);
    let window = Math.max(FIRST_WINDOW, q.pageSize * 4);
    const budget = { left: LOOKUP_BUDGET };
    while (hi > state.first_seq && budget.left > 0) {
      const lo = Math.max(state.first_seq, hi - window);
      const chunk = await this.#scan(filter, lo, hi, budget, SCAN_MAX_BYTES);
      if (chunk === undefined) return { attempts: out, nextBefore: hi };
      // Newest first; parsed now, so the raw window can go.
      const found: Stored<AttemptRecord>[] = [];
      let older = false;
      for (const m of chunk.messages.reverse()) {
        const r = parse(m);
        if (q.sinceMs !== undefined && r.kind === "attempt" && Date.parse(r.startTime) < q.sinceMs) {
          // The log is in time order: everything further back is older still.
          older = true;
          break;
        }
        if (wanted(r)) found.push(r);
      }
      for (let i = 0; i < found.length; i += BODY_LOOKUPS_IN_FLIGHT) {
        const batch = found.slice(i, i + Math.min(BODY_LOOKUPS_IN_FLIGHT, q.pageSize - out.length));
        await this.#joinBodies(batch, routed);
        for (const r of batch) {
          const bytes = attemptBytes(r);
          // Full by size: the next page starts with this record.
          if (!page.fits(bytes)) return { attempts: out, nextBefore: r.sequence + 1 };
          page.add(bytes);
          out.push(r);
          if (out.length === q.pageSize) {
            return { attempts: out, ...(r.sequence > state.first_seq ? { nextBefore: r.sequence } : {}) };
          }
        }
      }
      if (older) return { attempts: out };
      hi = chunk.from;
      if (!chunk.truncated) window = Math.min(MAX_WINDOW, window * 8);
    }
    return hi > state.first_seq ? { attempts: out, nextBefore: hi } : { attempts: out };
  }

  /**
   * Every record about one message (routing, attempts, dead letters), oldest first; only the
   * given source's when `sourceId` is set. At most MESSAGE_RECORDS_MAX lookups and about
   * 2 x SCAN_MAX_BYTES of records: beyond that the oldest are left out.
   */
  async forMessage(messageId: string, sourceId?: string): Promise<MessageRecords> {
    const hash = messageHash(messageId);
    const budget = { left: MESSAGE_RECORDS_MAX };
    const end = Number.MAX_SAFE_INTEGER;
    const routed = await this.#scan(routedSubject(hash), 0, end, budget, SCAN_MAX_BYTES);
    const rest = await this.#scan(attemptSubject("*", hash), 0, end, budget, SCAN_MAX_BYTES);
    const records = [...(routed?.messages ?? []), ...(rest?.messages ?? [])]
      .map(parse)
      .filter((r) => r.messageId === messageId && (!sourceId || r.sourceId === sourceId))
      .sort((a, b) => a.sequence - b.sequence);
    const truncated =
      routed === undefined || rest === undefined || routed.truncated || rest.truncated || budget.left <= 0;
    return { records, truncated };
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
        .map(async ([key, a]) => routed.set(key, await this.#routedOf(a.sourceId, a.messageId))),
    );
    for (const a of need) {
      const found = routed.get(callKey(a.sourceId, a.messageId)) ?? [];
      const body = (found.findLast((c) => c.seq < a.sequence) ?? found[0])?.body;
      if (body !== undefined) a.requestBody = body;
    }
  }

  /** Routed records of one call (source and message id), oldest first. */
  async #routedOf(sourceId: string, messageId: string) {
    const subject = routedSubject(messageHash(messageId));
    const out: { seq: number; body: string | undefined }[] = [];
    let seq = 1;
    for (let left = ROUTED_LOOKUPS_PER_MESSAGE; left > 0; left--) {
      const m = await this.#next(subject, seq);
      if (!m) break;
      const r = parse(m);
      if (r.kind === "routed" && r.messageId === messageId && r.sourceId === sourceId) {
        out.push({ seq: m.seq, body: r.body });
      }
      seq = m.seq + 1;
    }
    return out;
  }

  /**
   * Messages on `filter` with lo <= seq < hi, oldest first; undefined when the lookup budget ran
   * out. Past `maxBytes` the oldest are dropped: `from` is then the lowest sequence still covered
   * (the caller reads below it later) and `truncated` is set.
   */
  async #scan(
    filter: string,
    lo: number,
    hi: number,
    budget: { left: number },
    maxBytes: number,
  ): Promise<{ messages: StoredMsg[]; from: number; truncated: boolean } | undefined> {
    const out: StoredMsg[] = [];
    let bytes = 0;
    let from = lo;
    let first = 0;
    let seq = Math.max(1, lo);
    while (seq < hi) {
      if (budget.left-- <= 0) return undefined;
      const m = await this.#next(filter, seq);
      if (!m || m.seq >= hi) break;
      out.push(m);
      bytes += m.data.length;
      while (bytes > maxBytes && first < out.length - 1) {
        bytes -= out[first]!.data.length;
        out[first] = undefined as unknown as StoredMsg;
        first++;
        from = out[first]!.seq;
      }
      seq = m.seq + 1;
    }
    return { messages: out.slice(first), from, truncated: first > 0 };
  }

  async #next(filter: string, seq: number): Promise<StoredMsg | undefined> {
    try {
      const query = { seq, next_by_subj: filter } as unknown as { seq: number };
      return await this.#jsm.streams.getMessage(ATTEMPTS_STREAM, query);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

export function parse(m: StoredMsg): Stored {
  return { ...(JSON.parse(decoder.decode(m.data)) as LogRecord), sequence: m.seq };
}
