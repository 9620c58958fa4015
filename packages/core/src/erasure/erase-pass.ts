import type { NatsConnection } from "nats";
import { isAlreadyDeleted, isNotFound } from "../nats/jetstream-errors.js";
import { scanStream } from "../nats/scan-stream.js";
import { readStream } from "../nats/stream-cursor.js";
import {
  ATTEMPT_SUBJECTS,
  ATTEMPTS_STREAM,
  DEAD_STREAM,
  DELIVERIES_STREAM,
  deadSubject,
  EVENTS_STREAM,
  healthSubject,
  ORDERED_STREAM,
  ORDERED_SUBJECT_PREFIX,
} from "../nats/topology.js";
import { type ErasedCounts, NO_ERASURES } from "./deletion-record.js";
import {
  firstTimeOfDeadLetter,
  firstTimeOfDelivery,
  firstTimeOfLogRecord,
  type RawMessage,
  userOfDeadLetter,
  userOfDelivery,
  userOfLogRecord,
} from "./user-of-record.js";

/** Health summaries carry no calls: not even read. */
const HEALTH_PREFIX = healthSubject("");

/**
 * Where a user's calls are kept, how a message names its user, and what its removal counts as.
 * Streams with limits retention are read through a consumer on `filters` (fast); work-queue
 * streams, which take no second consumer, one lookup per message (they hold only what is pending).
 */
const STORES: readonly {
  stream: string;
  filters?: readonly string[];
  userOf: (m: RawMessage) => string | undefined;
  /**
   * For stores of copies: when the message's call was first stored, if earlier than the message
   * (user-of-record.ts). A copy made after the request's settle time is still the old call.
   */
  firstTime?: (m: RawMessage) => number | undefined;
  counts: keyof ErasedCounts;
}[] = [
  // Not routed yet: erased before the router fans it out.
  { stream: EVENTS_STREAM, userOf: userOfDelivery, counts: "pendingCalls" },
  {
    stream: DELIVERIES_STREAM,
    userOf: userOfDelivery,
    firstTime: firstTimeOfDelivery,
    counts: "pendingCalls",
  },
  {
    stream: ORDERED_STREAM,
    filters: [`${ORDERED_SUBJECT_PREFIX}>`],
    userOf: userOfDelivery,
    counts: "pendingCalls",
  },
  {
    stream: DEAD_STREAM,
    filters: [deadSubject(">")],
    userOf: userOfDeadLetter,
    firstTime: firstTimeOfDeadLetter,
    counts: "deadLetters",
  },
  {
    stream: ATTEMPTS_STREAM,
    filters: ATTEMPT_SUBJECTS.filter((f) => !f.startsWith(HEALTH_PREFIX)),
    userOf: userOfLogRecord,
    firstTime: firstTimeOfLogRecord,
    counts: "attemptRecords",
  },
];

/** What a pass needs of a stored message, whichever way it was read. */
interface Visited extends RawMessage {
  subject: string;
  seq: number;
  /** When the message was stored in this stream (ms). */
  timeMs: number;
}

/**
 * One pass over every store that holds calls: erases (deletes and overwrites) each message of a
 * user in `users` (user hash → time of the deletion request, ms) that belongs to a call accepted
 * before the request: on EVENTS, stored before it; elsewhere, stored before it plus `settleMs`
 * (what was in flight at the request is stored by then), or a copy of a delivery first stored
 * before that (parked again at a retry, dead-lettered, the records of a later attempt: made
 * whenever the retries go on, after the settle time too when no pass ran early). Later calls of
 * the same user are new data, not erased, so a user who keeps sending does not hold the deletion open. One by one by sequence — never a filtered purge
 * (nats/delete-messages.ts says why). Returns what was erased per user. Idempotent: a message
 * already gone (another replica's pass, a delivery acked meanwhile) is not counted.
 */
export async function erasePass(
  nc: NatsConnection,
  users: ReadonlyMap<string, number>,
  settleMs: number,
  /** Where the counts go as messages are erased: the caller keeps them if the pass fails half-way. */
  erased: Map<string, ErasedCounts> = new Map(),
): Promise<Map<string, ErasedCounts>> {
  const jsm = await nc.jetstreamManager();
  for (const store of STORES) {
    const visit = async (m: Visited) => {
      if (m.subject.startsWith(HEALTH_PREFIX)) return;
      const user = store.userOf(m);
      const requested = user === undefined ? undefined : users.get(user);
      if (user === undefined || requested === undefined) return;
      const until = requested + (store.stream === EVENTS_STREAM ? 0 : settleMs);
      // Stored (a copy: first stored) at or after that: a call accepted later, new data.
      if (m.timeMs >= until && (store.firstTime?.(m) ?? m.timeMs) >= until) return;
      let gone: boolean;
      try {
        gone = await jsm.streams.deleteMessage(store.stream, m.seq, true);
      } catch (err) {
        if (isAlreadyDeleted(err) || isNotFound(err)) return;
        throw err;
      }
      if (!gone) return;
      const c = { ...(erased.get(user) ?? NO_ERASURES) };
      c[store.counts]++;
      erased.set(user, c);
    };
    if (!store.filters) {
      await scanStream(jsm, store.stream, (m) =>
        visit({ subject: m.subject, seq: m.seq, data: m.data, headers: m.header, timeMs: m.time.getTime() }),
      );
      continue;
    }
    for (const filter of store.filters) {
      await readStream(nc, store.stream, filter, (m) =>
        visit({
          subject: m.subject,
          seq: m.seq,
          data: m.data,
          headers: m.headers,
          timeMs: m.info.timestampNanos / 1e6,
        }),
      );
    }
  }
  return erased;
}
