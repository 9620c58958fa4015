/**
 * The raw forwarder, the dispatch limit of issue 25: pull from a JetStream stream, POST the
 * message's bytes to the receiver, ack. No routing, signing, attempt log, retries or confirmed
 * acks: the least a forwarder on JetStream does per delivery, built the obvious way with the same
 * libraries Hookpost uses (nats.js `consume()`, an undici pool). Forked by the dispatcher bench
 * with `{ natsUrl, stream, consumer, url, inFlight, floor? }` as its argument; says `{ ready: true }`
 * once consuming, and runs until the bench disconnects.
 *
 * With `floor`, it also does the work no Hookpost delivery may skip (issue 25: no figure is bought
 * by turning off signing, the attempt log or durability), with Hookpost's own parts and nothing
 * else: parse the stored call and render its webhook body (core's `renderBody`), sign it
 * (`signatureHeaders`, Segment's HMAC with the given secret), confirm the ack (`confirmingAck`
 * over a `PipelinedPublisher`, the slot held until confirmed, as the dispatcher's puller does),
 * and write one attempt record with the body on `floor.logSubject` (a core publish, as
 * `AttemptLog` does). What a delivery costs below that is the floor of any design.
 */
import {
  confirmingAck,
  type DestinationRecord,
  type Logger,
  PipelinedPublisher,
  renderBody,
  signatureHeaders,
} from "@hookpost/core";
import { AckPolicy, connect, type JsMsg } from "nats";
import { Pool } from "undici";

/** What the bench passes (procs/processes.ts startRawForwarder). */
export interface RawForwarderOptions {
  natsUrl: string;
  stream: string;
  consumer: string;
  url: string;
  inFlight: number;
  /** The floor forwarder: the raw one plus the work every Hookpost delivery does (its log subject, its secret). */
  floor?: { logSubject: string; secret: string };
}

const o = JSON.parse(process.argv[2]!) as RawForwarderOptions;
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
const free = () => {
  busy--;
  const f = freed;
  freed = undefined;
  f?.();
};
process.send!({ ready: true });
process.on("disconnect", () => process.exit(0));

if (o.floor) await floor(o.floor);
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
    .finally(free);
}

/** The forwarder with the work every Hookpost delivery does (see the top of this file); never returns. */
async function floor(f: { logSubject: string; secret: string }): Promise<never> {
  const dest = { id: "floor", sharedSecret: f.secret, signing: "segment" } as DestinationRecord;
  const quiet = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;
  const acks = new PipelinedPublisher(nc, 5_000);
  const decoder = new TextDecoder();
  const deliver = async (original: JsMsg) => {
    const { msg, confirmed } = confirmingAck(original, quiet, acks);
    const call = JSON.parse(decoder.decode(msg.data));
    const text = renderBody(call);
    const body = Buffer.from(text);
    const started = Date.now();
    try {
      const r = await pool.request({
        path: target.pathname,
        method: "POST",
        headers: {
          "content-type": "application/json",
          "idempotency-key": call.messageId,
          ...signatureHeaders(dest, body, call.messageId),
        },
        body,
      });
      await r.body.dump();
      const ok = r.statusCode >= 200 && r.statusCode < 300;
      const record = {
        kind: "attempt",
        messageId: call.messageId,
        sourceId: call.sourceId,
        destinationId: dest.id,
        url: o.url,
        attemptNumber: 1,
        startTime: new Date(started).toISOString(),
        durationMs: Date.now() - started,
        status: r.statusCode,
        outcome: ok ? "success" : "server_error",
        requestBody: text,
      };
      nc.publish(f.logSubject, Buffer.from(JSON.stringify(record)));
      if (ok) msg.ack();
      else msg.nak();
    } catch {
      msg.nak();
    }
    await confirmed();
  };
  for await (const m of messages) {
    if (busy >= o.inFlight) await new Promise<void>((resolve) => (freed = resolve));
    busy++;
    void deliver(m).finally(free);
  }
  throw new Error("the consumer ended");
}
