import { DELIVERIES_STREAM } from "@hookpost/core";
import { restoreUncounted } from "@hookpost/dispatcher";
import { AckPolicy, type ConsumerInfo, DeliverPolicy, headers } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Pipeline, pipeline } from "./helpers.js";

// nats-server 2.9.10 was seen to keep DELIVERIES replicas apart after resets: the replica leading
// a consumer lacks deliveries the stream leader stores, so the consumer passes them without
// counting them (its ack floor above them), and a consumer created again does too. A single
// server cannot diverge from itself: the consumer's look is given as such a replica reports it.

let p: Pipeline;

beforeAll(async () => {
  p = await pipeline();
});

afterAll(async () => {
  await p?.close();
});

const SUBJECT = "hookpost.lanes.restore-me";

async function put(id: string): Promise<number> {
  const h = headers();
  h.set("Hookpost-Message-Id", id);
  return (
    await p.js.publish(SUBJECT, new TextEncoder().encode(id), { headers: h, msgID: `${id}:restore-me` })
  ).seq;
}

describe("storing again what a consumer passed without counting", () => {
  it("copies the passed deliveries, deletes the originals, and the consumer hands the copies out", async () => {
    const passed = [await put("a"), await put("b")];
    await p.jsm.consumers.add(DELIVERIES_STREAM, {
      durable_name: "lane_restore-me",
      filter_subject: SUBJECT,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    });
    const real = await p.jsm.consumers.info(DELIVERIES_STREAM, "lane_restore-me");
    const floor = { ...real.delivered, stream_seq: passed[1]!, consumer_seq: 2 };
    const info: ConsumerInfo = {
      ...real,
      num_pending: 0,
      num_ack_pending: 0,
      ack_floor: floor,
      delivered: floor,
    };
    // Stored after the look: not passed, left alone.
    await put("c");

    // Both replicas act on the same look at once: one copy each is stored (Nats-Msg-Id).
    await Promise.all([restoreUncounted(p, SUBJECT, info), restoreUncounted(p, SUBJECT, info)]);
    const stored = await p.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: SUBJECT });
    expect(stored.state.subjects?.[SUBJECT]).toBe(3);

    const consumer = await p.js.consumers.get(DELIVERIES_STREAM, "lane_restore-me");
    const got: string[] = [];
    for (let i = 0; i < 3; i++) {
      const m = await consumer.next({ expires: 5000 });
      got.push(m!.headers!.get("Hookpost-Message-Id"));
      expect(m!.headers!.get("Hookpost-Delivery-Id")).toBe(i === 0 ? "" : `${got[i]}:restore-me`);
      m!.ack();
    }
    // The one not yet reached was left where it was and comes first; the copies follow.
    expect(got).toEqual(["c", "a", "b"]);
    for (const seq of passed)
      await expect(p.jsm.streams.getMessage(DELIVERIES_STREAM, { seq })).rejects.toThrow();
  });
});
