import { ADMIN_PAGE_MAX_BYTES, ADMIN_PAGES, answerBytes, PageBudget } from "@hookpost/contract";
import {
  headers,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  type StoredMsg,
} from "nats";
import { messageHash, ofDestination, type RoutedRecord } from "../attempts/record.js";
import { isNotFound } from "../nats/jetstream-errors.js";
import { nextMessage } from "../nats/next-message.js";
import {
  ATTEMPTS_STREAM,
  DEAD_STREAM,
  deadSubject,
  partitionSubject,
  routedSubject,
  targetId,
} from "../nats/topology.js";
import {
  deliveryMsgId,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  SOURCE_ID_HEADER,
  setCallHeaders,
  USER_HASH_HEADER,
} from "./delivery-headers.js";
import type { DeadLetter, DeadLetterRecord } from "./record.js";

export interface ListOptions {
  /** Only records with a greater sequence (0: from the start). */
  afterSequence?: number;
  /** At most this many (default 100, at most 1000). */
  pageSize?: number;
  /** Only dead letters of calls from this source. */
  sourceId?: string;
  /** The page stops before its records exceed this many answer bytes (one record always fits). */
  maxBytes?: number;
}

export interface DeadLetterPage {
  letters: DeadLetter[];
  /** The afterSequence of the next page; undefined when there is none. */
  nextAfter?: number;
}

/** The body of a call's routing record (source, message id, about when it was routed), if the log has it. */
export type RoutedBodyLookup = (
  sourceId: string,
  messageId: string,
  timeMs: number,
) => Promise<string | undefined>;

/** Records one page looks at, at most (a source filter skips the others'). */
const PAGE_LOOKUPS = 20_000;

/** Bytes a dead letter adds to an answer. */
export function deadLetterBytes(l: DeadLetterRecord): number {
  return answerBytes(
    l.messageId,
    l.destinationId,
    l.sourceId,
    l.body,
    l.reason,
    ...l.outcomes.flatMap((o) => [o.url, o.detail]),
  );
}

/**
 * Dead letters live on the DEAD stream, one subject per destination. The dispatcher records them;
 * the admin API lists and replays them. Reads use "next message by subject" lookups rather than a
 * consumer, so listing never competes with anything and leaves no state behind.
 */
export class DeadLetters {
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #bodies: boolean;
  #routedLookup: RoutedBodyLookup | undefined;
  readonly #onRecorded = new Set<() => void>();

  private constructor(js: JetStreamClient, jsm: JetStreamManager, bodies: boolean) {
    this.#js = js;
    this.#jsm = jsm;
    this.#bodies = bodies;
  }

  /** `bodies` (DEAD_LETTER_BODIES, default true): false records metadata only. */
  static async open(nc: NatsConnection, o: { bodies?: boolean } = {}): Promise<DeadLetters> {
    return new DeadLetters(nc.jetstream(), await nc.jetstreamManager(), o.bodies ?? true);
  }

  /**
   * Where a replay finds the body of a letter kept without it: the attempt log's index (the API
   * sets it). Without one, the routing record is looked up by its subject, as before issue 28
   * (records in that layout only).
   */
  useRoutedBodies(lookup: RoutedBodyLookup): void {
    this.#routedLookup = lookup;
  }

  /** Calls `fn` after each letter stored here; returns the way to stop. */
  onRecorded(fn: () => void): () => void {
    this.#onRecorded.add(fn);
    return () => this.#onRecorded.delete(fn);
  }

  /**
   * Stores a record. `dedupKey` names the failed delivery, so a dispatcher that crashes between
   * recording and acking records it once when the delivery comes back.
   */
  async record(letter: DeadLetterRecord, dedupKey: string): Promise<number> {
    // A FAN_OUT target's letter is its destination's, with the URL index (docs/design/shaping.md 7.2).
    const full = ofDestination(letter);
    // Payload-free mode: nothing of the call's content is kept here.
    const record: DeadLetterRecord = this.#bodies ? full : { ...full, body: "", bodyOmitted: true };
    // The user also as a header: erasure matches dead letters without parsing them.
    const h = record.userHash ? headers() : undefined;
    if (h && record.userHash) h.set(USER_HASH_HEADER, record.userHash);
    const ack = await this.#js.publish(deadSubject(record.destinationId), JSON.stringify(record), {
      msgID: `dead:${dedupKey}`,
      ...(h ? { headers: h } : {}),
    });
    for (const fn of this.#onRecorded) fn();
    return ack.seq;
  }

  /** Dead letters of one destination (every destination when empty), oldest first. */
  async list(destinationId: string, options: ListOptions = {}): Promise<DeadLetter[]> {
    return (await this.page(destinationId, options)).letters;
  }

  /**
   * One page of dead letters, oldest first, read one record at a time: it stops at the page
   * size, at `maxBytes` of records, or after PAGE_LOOKUPS records (a source filter), and says
   * where the next page starts.
   */
  async page(destinationId: string, options: ListOptions = {}): Promise<DeadLetterPage> {
    const limit = ADMIN_PAGES.deadLetters;
    const size = Math.min(Math.max(1, options.pageSize || limit.default), limit.max);
    const budget = new PageBudget(options.maxBytes ?? ADMIN_PAGE_MAX_BYTES);
    const out: DeadLetter[] = [];
    let seq = (options.afterSequence ?? 0) + 1;
    for (let lookups = 0; lookups < PAGE_LOOKUPS; lookups++) {
      const m = await this.#next(destinationId, seq);
      if (!m) return { letters: out };
      const letter = parse(m);
      if (!options.sourceId || letter.sourceId === options.sourceId) {
        const bytes = deadLetterBytes(letter);
        if (!budget.fits(bytes)) return { letters: out, nextAfter: m.seq - 1 };
        budget.add(bytes);
        out.push(letter);
        if (out.length === size) {
          // One more lookup, so that the last page says it is the last.
          const more = await this.#next(destinationId, m.seq + 1);
          return more ? { letters: out, nextAfter: m.seq } : { letters: out };
        }
      }
      seq = m.seq + 1;
    }
    return { letters: out, nextAfter: seq - 1 };
  }

  /** One dead letter, if `sequence` is a dead letter of this destination. */
  async get(destinationId: string, sequence: number): Promise<DeadLetter | undefined> {
    try {
      const m = await this.#jsm.streams.getMessage(DEAD_STREAM, { seq: sequence });
      return m.subject === deadSubject(destinationId) ? parse(m) : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Puts dead letters back on DELIVERIES (same body and headers, a fresh retry window) and
   * deletes their records. Without `sequences`, replays all of the destination's dead letters.
   * The caller checks that the destination still exists (and that given sequences are its
   * records). Returns how many were replayed; `range` keeps only records that became dead
   * letters at or after `sinceMs` and before `untilMs`, and only calls from `sourceId`.
   */
  async replay(
    destinationId: string,
    sequences?: readonly number[],
    range: { sinceMs?: number; untilMs?: number; sourceId?: string } = {},
  ): Promise<{ replayed: number }> {
    const inRange = (l: DeadLetter) => {
      const t = Date.parse(l.deadTime);
      return (
        (range.sourceId === undefined || l.sourceId === range.sourceId) &&
        (range.sinceMs === undefined || t >= range.sinceMs) &&
        (range.untilMs === undefined || t < range.untilMs)
      );
    };
    let replayed = 0;
    if (sequences && sequences.length > 0) {
      for (const seq of new Set(sequences)) {
        const letter = await this.get(destinationId, seq);
        if (letter && inRange(letter) && (await this.#replayOne(letter))) replayed++;
      }
      return { replayed };
    }
    // Stop at the current end: anything that dies again while we replay is not replayed twice.
    const last = (await this.#jsm.streams.info(DEAD_STREAM)).state.last_seq;
    let seq = 1;
    for (;;) {
      const m = await this.#next(destinationId, seq);
      if (!m || m.seq > last) break;
      const letter = parse(m);
      if (inRange(letter) && (await this.#replayOne(letter))) replayed++;
      seq = m.seq + 1;
    }
    return { replayed };
  }

  async #replayOne(letter: DeadLetter): Promise<boolean> {
    const body = letter.bodyOmitted ? await this.#routedBody(letter) : letter.body;
    // Kept without its body and the attempt log has none either: nothing to send.
    if (body === undefined) return false;
    const h = headers();
    h.set(MESSAGE_ID_HEADER, letter.messageId);
    h.set(SOURCE_ID_HEADER, letter.sourceId);
    if (letter.notRendered !== undefined) h.set(NOT_RENDERED_HEADER, letter.notRendered);
    if (letter.userHash) h.set(USER_HASH_HEADER, letter.userHash);
    setCallHeaders(h, letter);
    // A fresh id (the original is still in the dedup window), yet the same for a repeated
    // replay of the same record, so retrying a replay request does not deliver twice.
    // A FAN_OUT letter goes back to its own URL (its target).
    const target =
      letter.urlIndex === undefined ? letter.destinationId : targetId(letter.destinationId, letter.urlIndex);
    const msgID = `${deliveryMsgId(letter.sourceId, letter.messageId, target)}:replay:${letter.sequence}`;
    // Partition 0 exists whatever DELIVERY_PARTITIONS is; any partition reaches every destination.
    await this.#js.publish(partitionSubject(0, target), body, { msgID, headers: h });
    try {
      return await this.#jsm.streams.deleteMessage(DEAD_STREAM, letter.sequence, false);
    } catch (err) {
      // Replayed concurrently by someone else: the delivery was deduplicated, nothing lost.
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * The body of a letter recorded without it: the same bytes went to every destination, and the
   * call's routing record keeps them when ATTEMPT_LOG_BODIES is on (until the log ages it out).
   */
  async #routedBody(letter: DeadLetter): Promise<string | undefined> {
    if (this.#routedLookup) {
      return this.#routedLookup(letter.sourceId, letter.messageId, Date.parse(letter.firstAttemptTime));
    }
    const subject = routedSubject(messageHash(letter.messageId));
    for (let seq = 1; ; ) {
      const m = await nextMessage(this.#jsm, ATTEMPTS_STREAM, subject, seq);
      if (!m) return undefined;
      const r = JSON.parse(new TextDecoder().decode(m.data)) as RoutedRecord;
      if (r.messageId === letter.messageId && r.sourceId === letter.sourceId && r.body !== undefined) {
        return r.body;
      }
      seq = m.seq + 1;
    }
  }

  async #next(destinationId: string, seq: number): Promise<StoredMsg | undefined> {
    try {
      // nats-server >= 2.9 answers "the first message on this subject at or after seq".
      // Empty: every destination's (hookpost.dead.>).
      const subject = destinationId === "" ? deadSubject(">") : deadSubject(destinationId);
      const query = { seq, next_by_subj: subject } as unknown as { seq: number };
      return await this.#jsm.streams.getMessage(DEAD_STREAM, query);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

function parse(m: StoredMsg): DeadLetter {
  const record = JSON.parse(new TextDecoder().decode(m.data)) as DeadLetterRecord;
  return { sequence: m.seq, ...record };
}
