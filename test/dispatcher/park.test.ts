import { DELIVERIES_STREAM, laneConsumer, laneSubject, PipelinedPublisher } from "@hookpost/core";
import { type DeliveryDeps, DeliveryHandler, laneConsumerConfig, Parking } from "@hookpost/dispatcher";
import { headers } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { destination, type Pipeline, pipeline } from "./helpers.js";

// Parking moves a delivery to its destination's lane with a Nats-Msg-Id per attempt count, so a
// park retried after a timeout is stored once. A lane delivery "parked" again unchanged (its
// destination paused between its pull and its attempt) would carry its own Nats-Msg-Id: JetStream
// drops that copy as a duplicate, and acking the original would lose the call.

let p: Pipeline;
let pipe: PipelinedPublisher;

beforeAll(async () => {
  p = await pipeline();
  pipe = new PipelinedPublisher(p.nc, 5000);
});

afterAll(async () => {
  pipe?.close();
  await p?.close();
});

const laneCount = async (id: string) => {
  const info = await p.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: laneSubject(id) });
  return info.state.subjects?.[laneSubject(id)] ?? 0;
};

describe("parking", () => {
  it("keeps a lane delivery on its lane when it is parked again unchanged", async () => {
    await p.store.putDestination(destination({ id: "held", urls: ["http://127.0.0.1:9/"], enabled: false }));
    const parking = new Parking(pipe);
    const h = headers();
    h.set("Nats-Msg-Id", "call-1:held");
    const state = { attempts: 1, firstTimeMs: Date.now(), dueMs: 0 };
    await parking.park("held", { data: new TextEncoder().encode("{}"), headers: h, seq: 1 }, 1, 0, state);
    expect(await laneCount("held")).toBe(1);

    await p.jsm.consumers.add(
      DELIVERIES_STREAM,
      laneConsumerConfig("held", { ackWaitMs: 30_000, maxAckPending: 10 }),
    );
    const consumer = await p.js.consumers.get(DELIVERIES_STREAM, laneConsumer("held"));
    const msg = await consumer.next({ expires: 5000 });
    expect(msg?.subject).toBe(laneSubject("held"));

    const handler = new DeliveryHandler({
      store: p.store,
      parking,
      ackWaitMs: 30_000,
      logger: quietLogger,
      shutdown: new AbortController().signal,
    } as Partial<DeliveryDeps> as DeliveryDeps);
    expect(await handler.park("held", msg!)).toBe(true);

    // Still stored, and handed out again: nothing acked it away.
    expect(await laneCount("held")).toBe(1);
    const again = await consumer.next({ expires: 5000 });
    expect(again?.info.deliveryCount).toBe(2);
    again!.ack();
  });
});
