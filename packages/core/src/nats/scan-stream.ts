import type { JetStreamManager, StoredMsg } from "nats";
import { isNotFound } from "./jetstream-errors.js";
import { nextMessage } from "./next-message.js";

/**
 * Reads every message a stream holds now, oldest first, one direct lookup per message, and stops
 * at the last message stored when it started (later ones are left to the next scan). `visit` may
 * delete the message it is given. Lookups rather than a consumer: work-queue streams (EVENTS,
 * DELIVERIES) take no second consumer, and nats-server 2.9 has no unacknowledged pull consumers.
 * A stream that does not exist is empty.
 */
export async function scanStream(
  jsm: JetStreamManager,
  stream: string,
  visit: (m: StoredMsg) => Promise<void>,
): Promise<void> {
  let last: number;
  try {
    const info = await jsm.streams.info(stream);
    if (info.state.messages === 0) return;
    last = info.state.last_seq;
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
  for (let seq = 1; seq <= last; ) {
    const m = await nextMessage(jsm, stream, ">", seq);
    if (!m || m.seq > last) return;
    await visit(m);
    seq = m.seq + 1;
  }
}
