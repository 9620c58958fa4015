/**
 * The raw forwarder, the dispatch limit of issue 25: pull from a JetStream stream, POST the
 * message's bytes to the receiver, ack. No routing, signing, attempt log, retries or confirmed
 * acks: the least a forwarder on JetStream does per delivery, built the obvious way with the same
 * libraries Hookpost uses (nats.js `consume()`, an undici pool). Forked by the dispatcher bench
 * with `{ natsUrl, stream, consumer, url, inFlight }` as its argument; says `{ ready: true }` once
 * consuming, and runs until the bench disconnects.
 */
import { AckPolicy, connect } from "nats";
import { Pool } from "undici";

const o = JSON.parse(process.argv[2]!) as {
  natsUrl: string;
  stream: string;
  consumer: string;
  url: string;
  inFlight: number;
};
const nc = await connect({ servers: o.natsUrl, noAsyncTraces: true });
const jsm = await nc.jetstreamManager();
await jsm.consumers.add(o.stream, {
  durable_name: o.consumer,
  ack_policy: AckPolicy.Explicit,
  max_ack_pending: o.inFlight * 2,
});
const target = new URL(o.url);
const pool = new Pool(target.origin, { connections: o.inFlight, pipelining: 1 });
const consumer = await nc.jetstream().consumers.get(o.stream, o.consumer);
const messages = await consumer.consume({ max_messages: o.inFlight });

// Requests in flight at most `inFlight`: the iterator waits while every slot is busy.
let busy = 0;
let freed: (() => void) | undefined;
process.send!({ ready: true });
process.on("disconnect", () => process.exit(0));
for await (const m of messages) {
  if (busy >= o.inFlight) await new Promise<void>((resolve) => (freed = resolve));
  busy++;
  pool
    .request({
      path: target.pathname,
      method: "POST",
      headers: {
        "content-type": "application/json",
        "idempotency-key": m.headers?.get("Idempotency-Key") ?? "",
      },
      body: m.data,
    })
    .then(async (r) => {
      await r.body.dump();
      if (r.statusCode >= 200 && r.statusCode < 300) m.ack();
      else m.nak();
    })
    .catch(() => m.nak())
    .finally(() => {
      busy--;
      const f = freed;
      freed = undefined;
      f?.();
    });
}
