import { type Look, verdict } from "@hookpost/dispatcher";
import type { ConsumerInfo } from "nats";
import { describe, expect, it } from "vitest";

/** The consumer numbers the verdict reads; the rest of ConsumerInfo does not matter to it. */
function look(o: {
  stored: number;
  firstSeq: number;
  pending: number;
  unacked: number;
  floor: number;
  delivered: number;
  nowMs: number;
}): Look {
  const info = {
    num_pending: o.pending,
    num_ack_pending: o.unacked,
    ack_floor: { stream_seq: o.floor, consumer_seq: 0 },
    delivered: { stream_seq: o.delivered, consumer_seq: 0 },
  } as unknown as ConsumerInfo;
  return { info, stored: o.stored, firstSeq: o.firstSeq, nowMs: o.nowMs };
}

const HOLD = 60_000;

describe("stranded deliveries: when a consumer is created again", () => {
  it("never while the consumer counts everything its subjects store", () => {
    const l = look({ stored: 5, firstSeq: 10, pending: 3, unacked: 2, floor: 9, delivered: 11, nowMs: 0 });
    expect(verdict({ firstSeq: 10, sinceMs: -1e9 }, l, HOLD)).toEqual({
      recreate: false,
      suspicion: undefined,
    });
  });

  it("not on the first look at a mismatch (an ack being applied looks the same for a moment)", () => {
    const l = look({ stored: 4, firstSeq: 10, pending: 0, unacked: 0, floor: 20, delivered: 20, nowMs: 5 });
    expect(verdict(undefined, l, HOLD)).toEqual({ recreate: false, suspicion: { firstSeq: 10, sinceMs: 5 } });
  });

  it("on the second look at the same message below the ack floor, or uncounted either side of it", () => {
    const last = { firstSeq: 10, sinceMs: 0 };
    const below = look({
      stored: 4,
      firstSeq: 10,
      pending: 0,
      unacked: 1,
      floor: 20,
      delivered: 25,
      nowMs: 10,
    });
    expect(verdict(last, below, HOLD)).toEqual({ recreate: true });
    const held = look({
      stored: 4,
      firstSeq: 10,
      pending: 0,
      unacked: 0,
      floor: 5,
      delivered: 25,
      nowMs: 10,
    });
    expect(verdict(last, held, HOLD)).toEqual({ recreate: true });
    const ahead = look({
      stored: 4,
      firstSeq: 10,
      pending: 0,
      unacked: 0,
      floor: 5,
      delivered: 8,
      nowMs: 10,
    });
    expect(verdict(last, ahead, HOLD)).toEqual({ recreate: true });
  });

  it("a message that may be held right now only once the mismatch outlasts any hold", () => {
    const last = { firstSeq: 10, sinceMs: 0 };
    const early = look({
      stored: 9,
      firstSeq: 10,
      pending: 2,
      unacked: 1,
      floor: 5,
      delivered: 30,
      nowMs: HOLD - 1,
    });
    expect(verdict(last, early, HOLD)).toEqual({ recreate: false, suspicion: last });
    const late = look({
      stored: 9,
      firstSeq: 10,
      pending: 2,
      unacked: 1,
      floor: 5,
      delivered: 30,
      nowMs: HOLD,
    });
    expect(verdict(last, late, HOLD)).toEqual({ recreate: true });
  });

  it("starts over when the oldest stored message changed (the consumer is moving)", () => {
    const l = look({ stored: 4, firstSeq: 11, pending: 0, unacked: 0, floor: 20, delivered: 20, nowMs: 7 });
    expect(verdict({ firstSeq: 10, sinceMs: 0 }, l, HOLD)).toEqual({
      recreate: false,
      suspicion: { firstSeq: 11, sinceMs: 7 },
    });
  });
});
