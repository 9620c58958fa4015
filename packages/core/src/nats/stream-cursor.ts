import { consumerOpts, type JsMsg, type NatsConnection } from "nats";
import { isNotFound } from "./jetstream-errors.js";
import { nextMessage } from "./next-message.js";

/** No message for this long (the last ones were removed meanwhile): the read is over. */
const IDLE_MS = 5000;

/**
 * Reads every message stored on `filter` now, oldest first, with an ordered push consumer (the
 * server streams them with flow control: thousands of times fewer round trips than one lookup per
 * message), and stops at the last message stored when it started. For streams with limits
 * retention only: a work-queue stream takes no second consumer. `visit` may delete the message.
 */
export async function readStream(
  nc: NatsConnection,
  stream: string,
  filter: string,
  visit: (m: JsMsg) => Promise<void>,
): Promise<void> {
  const jsm = await nc.jetstreamManager();
  let last: number;
  try {
    const info = await jsm.streams.info(stream);
    last = info.state.last_seq;
    // Nothing on the filter: a subscription would wait for ever.
    if (info.state.messages === 0 || !(await nextMessage(jsm, stream, filter, 1))) return;
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
  const opts = consumerOpts();
  opts.orderedConsumer();
  opts.deliverAll();
  opts.bindStream(stream);
  const sub = await nc.jetstream().subscribe(filter, opts);
  let idle = setTimeout(() => sub.unsubscribe(), IDLE_MS);
  try {
    for await (const m of sub) {
      clearTimeout(idle);
      if (m.seq > last) break;
      await visit(m);
      if (m.seq >= last || m.info.pending === 0) break;
      idle = setTimeout(() => sub.unsubscribe(), IDLE_MS);
    }
  } finally {
    clearTimeout(idle);
    sub.unsubscribe();
  }
}
