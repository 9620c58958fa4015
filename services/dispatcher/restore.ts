import {
  DELIVERIES_STREAM,
  FIRST_TIME_HEADER,
  isAlreadyDeleted,
  isNotFound,
  nextMessage,
} from "@hookpost/core";
import { type ConsumerInfo, type JetStreamClient, type JetStreamManager, headers as natsHeaders } from "nats";
import { DELIVERY_ID_HEADER } from "./parking.js";

/**
 * Storing again what a consumer cannot see (docs/design/delivery-at-scale.md §7). nats-server
 * 2.9.10 was seen, after replicas reset their stream ("stream store EOF") under load, to keep the
 * replicas of DELIVERIES apart: the stream leader stores deliveries that the replica leading a
 * consumer does not, so that consumer skips them, and a consumer created again skips them too.
 * A copy published anew goes through the stream's log to every replica and is counted; the
 * original is deleted only once the copy is stored. Two replicas doing it at once store one copy
 * (its Nats-Msg-Id names the original).
 */

const NATS_MSG_ID = "Nats-Msg-Id";

/**
 * A stored message its consumer will never hand out: at or below the ack floor (counted as
 * acknowledged), delivered with nothing unacknowledged, or not yet delivered with nothing pending.
 */
export function uncounted(seq: number, c: ConsumerInfo): boolean {
  if (seq <= c.ack_floor.stream_seq) return true;
  if (seq <= c.delivered.stream_seq) return c.num_ack_pending === 0;
  return c.num_pending === 0;
}

/** Copies made per look, so that one check never runs for minutes. */
export const RESTORE_LIMIT = 5000;

export interface RestoreDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * Stores again every message on `filter` that `info` (its consumer, read just before) has passed
 * without counting it: at or below its ack floor, or delivered while nothing is unacknowledged.
 * Messages the consumer has not reached yet are left alone. Resolves with how many were copied.
 */
export async function restoreUncounted(
  d: RestoreDeps,
  filter: string,
  info: ConsumerInfo,
  limit = RESTORE_LIMIT,
): Promise<number> {
  const passed = Math.max(info.delivered.stream_seq, info.ack_floor.stream_seq);
  let copied = 0;
  let seq = 1;
  while (copied < limit) {
    const m = await nextMessage(d.jsm, DELIVERIES_STREAM, filter, seq);
    if (!m || m.seq > passed) break;
    seq = m.seq + 1;
    if (!uncounted(m.seq, info)) continue;
    const h = natsHeaders();
    for (const k of m.header?.keys() ?? [])
      if (k !== NATS_MSG_ID) for (const v of m.header.values(k)) h.append(k, v);
    // Parking derives its Nats-Msg-Ids from the delivery id: the copy keeps the original's.
    const base = m.header?.get(DELIVERY_ID_HEADER) || m.header?.get(NATS_MSG_ID) || `${m.subject}:${m.seq}`;
    h.set(DELIVERY_ID_HEADER, base);
    // The retry window runs from when the delivery was first stored, not from the copy.
    if (!m.header?.get(FIRST_TIME_HEADER)) h.set(FIRST_TIME_HEADER, String(m.time.getTime()));
    await d.js.publish(m.subject, m.data, { headers: h, msgID: `${base}~stored-again-${m.seq}` });
    try {
      await d.jsm.streams.deleteMessage(DELIVERIES_STREAM, m.seq, false);
    } catch (err) {
      if (!isAlreadyDeleted(err) && !isNotFound(err)) throw err;
    }
    copied++;
  }
  return copied;
}
