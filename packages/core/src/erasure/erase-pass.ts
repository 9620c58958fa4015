import type { NatsConnection, StoredMsg } from "nats";
import { isAlreadyDeleted, isNotFound } from "../nats/jetstream-errors.js";
import { scanStream } from "../nats/scan-stream.js";
import {
  ATTEMPTS_STREAM,
  DEAD_STREAM,
  DELIVERIES_STREAM,
  EVENTS_STREAM,
  healthSubject,
  ORDERED_STREAM,
} from "../nats/topology.js";
import { type ErasedCounts, NO_ERASURES } from "./deletion-record.js";
import { type RawMessage, userOfDeadLetter, userOfDelivery, userOfLogRecord } from "./user-of-record.js";

/** Where a user's calls are kept, how a message names its user, and what its removal counts as. */
const STORES: readonly {
  stream: string;
  userOf: (m: RawMessage) => string | undefined;
  counts: keyof ErasedCounts;
}[] = [
  // Not routed yet: erased before the router fans it out.
  { stream: EVENTS_STREAM, userOf: userOfDelivery, counts: "pendingCalls" },
  { stream: DELIVERIES_STREAM, userOf: userOfDelivery, counts: "pendingCalls" },
  { stream: ORDERED_STREAM, userOf: userOfDelivery, counts: "pendingCalls" },
  { stream: DEAD_STREAM, userOf: userOfDeadLetter, counts: "deadLetters" },
  { stream: ATTEMPTS_STREAM, userOf: userOfLogRecord, counts: "attemptRecords" },
];

/** Health summaries carry no calls: not even read. */
const HEALTH_PREFIX = healthSubject("");

/**
 * One pass over every store that holds calls: erases (deletes and overwrites) each message of a
 * user in `users` (user hashes), one by one by sequence — never a filtered purge
 * (nats/delete-messages.ts says why). Returns what was erased per user. Idempotent: a message
 * already gone (another replica's pass, a delivery acked meanwhile) is not counted.
 */
export async function erasePass(
  nc: NatsConnection,
  users: ReadonlySet<string>,
): Promise<Map<string, ErasedCounts>> {
  const jsm = await nc.jetstreamManager();
  const erased = new Map<string, ErasedCounts>();
  for (const store of STORES) {
    await scanStream(jsm, store.stream, async (m: StoredMsg) => {
      if (m.subject.startsWith(HEALTH_PREFIX)) return;
      const user = store.userOf({ data: m.data, headers: m.header });
      if (user === undefined || !users.has(user)) return;
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
    });
  }
  return erased;
}
