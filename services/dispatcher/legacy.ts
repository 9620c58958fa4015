import type { Logger } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  destinationOfSubject,
  isNotFound,
  LEGACY_CONSUMER_PREFIX,
  legacyDeliverySubject,
  nextMessage,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { deleteConsumer } from "./consumers.js";
import { type Parking, stateOf } from "./parking.js";

export interface LegacyDeps {
  jsm: JetStreamManager;
  parking: Parking;
  logger: Logger;
}

/**
 * Moves what the per-destination layout (before issue 24: consumer `dest_<id>` on
 * `hookpost.deliveries.<id>`) still holds to the destinations' lanes, and removes those
 * consumers. A work-queue stream keeps a message whose consumer is deleted, so the consumer goes
 * first (nothing pulls it any more) and every message left on a legacy subject is parked, then
 * deleted. A crash midway leaves the rest for the next run; a message parked twice is stored
 * once (same Nats-Msg-Id). Runs at start and with the janitor (an older replica may still route
 * there during a rolling upgrade). Returns how many deliveries moved.
 */
export async function migrateLegacyConsumers(d: LegacyDeps): Promise<number> {
  for await (const c of d.jsm.consumers.list(DELIVERIES_STREAM)) {
    if (c?.name.startsWith(LEGACY_CONSUMER_PREFIX)) await deleteConsumer(d.jsm, c.name);
  }
  // `*` matches one token: only the legacy `hookpost.deliveries.<id>`, never `<p>.<id>`.
  const info = await d.jsm.streams.info(DELIVERIES_STREAM, {
    subjects_filter: `${DELIVERY_SUBJECT_PREFIX}*`,
  });
  let moved = 0;
  for (const subject of Object.keys(info.state.subjects ?? {})) {
    const id = destinationOfSubject(subject);
    if (id === undefined) continue;
    for (let seq = 1; ; ) {
      const m = await nextMessage(d.jsm, DELIVERIES_STREAM, legacyDeliverySubject(id), seq);
      if (!m) break;
      const state = stateOf(m.header, m.time.getTime());
      await d.parking.park(id, { data: m.data, headers: m.header, seq: m.seq }, state.attempts, 0, state);
      try {
        await d.jsm.streams.deleteMessage(DELIVERIES_STREAM, m.seq, false);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      moved++;
      seq = m.seq + 1;
    }
  }
  if (moved > 0) d.logger.info({ moved }, "deliveries of the per-destination layout moved to lanes");
  return moved;
}
