import { type Look, type Suspicion, verdict } from "@hookpost/dispatcher";
import type { ConsumerInfo } from "nats";
import { describe, expect, it } from "vitest";

/** The consumer numbers the verdict reads; the rest of ConsumerInfo does not matter to it. */
interface Numbers {
  stored: number;
  firstSeq: number;
  pending: number;
  unacked: number;
  floor: number;
  delivered: number;
  nowMs: number;
}

function look(o: Numbers): Look {
  const info = {
    num_pending: o.pending,
    num_ack_pending: o.unacked,
    ack_floor: { stream_seq: o.floor, consumer_seq: 0 },
    delivered: { stream_seq: o.delivered, consumer_seq: 0 },
  } as unknown as ConsumerInfo;
  return { info, stored: o.stored, firstSeq: o.firstSeq, nowMs: o.nowMs };
}

const HOLD = 60_000;
const LAST = { firstSeq: 10, sinceMs: 0 };
/** A mismatch seen before: the oldest stored message (10) is not counted by the consumer. */
const MISSING = { stored: 4, firstSeq: 10, pending: 0, unacked: 0 };
/** A mismatch where the oldest stored message may be held by a delivery in flight right now. */
const MAYBE_HELD = { stored: 9, firstSeq: 10, pending: 2, unacked: 1, floor: 5, delivered: 30 };

// One row a look: the last suspicion, what the consumer counts now, and the verdict.
const cases: {
  name: string;
  last: Suspicion | undefined;
  now: Numbers;
  verdict: ReturnType<typeof verdict>;
}[] = [
  {
    name: "never while the consumer counts everything its subjects store",
    last: { firstSeq: 10, sinceMs: -1e9 },
    now: { stored: 5, firstSeq: 10, pending: 3, unacked: 2, floor: 9, delivered: 11, nowMs: 0 },
    verdict: { recreate: false, suspicion: undefined },
  },
  {
    name: "not on the first look at a mismatch (an ack being applied looks the same for a moment)",
    last: undefined,
    now: { ...MISSING, floor: 20, delivered: 20, nowMs: 5 },
    verdict: { recreate: false, suspicion: { firstSeq: 10, sinceMs: 5 } },
  },
  {
    name: "on the second look at the same message below the ack floor",
    last: LAST,
    now: { ...MISSING, unacked: 1, floor: 20, delivered: 25, nowMs: 10 },
    verdict: { recreate: true },
  },
  {
    name: "on the second look at the same message uncounted above the ack floor",
    last: LAST,
    now: { ...MISSING, floor: 5, delivered: 25, nowMs: 10 },
    verdict: { recreate: true },
  },
  {
    name: "on the second look at the same message uncounted ahead of the delivered sequence",
    last: LAST,
    now: { ...MISSING, floor: 5, delivered: 8, nowMs: 10 },
    verdict: { recreate: true },
  },
  {
    name: "not for a message that may be held right now while the mismatch is shorter than any hold",
    last: LAST,
    now: { ...MAYBE_HELD, nowMs: HOLD - 1 },
    verdict: { recreate: false, suspicion: LAST },
  },
  {
    name: "for a message that may be held right now once the mismatch outlasts any hold",
    last: LAST,
    now: { ...MAYBE_HELD, nowMs: HOLD },
    verdict: { recreate: true },
  },
  {
    name: "starts over when the oldest stored message changed (the consumer is moving)",
    last: LAST,
    now: { ...MISSING, firstSeq: 11, floor: 20, delivered: 20, nowMs: 7 },
    verdict: { recreate: false, suspicion: { firstSeq: 11, sinceMs: 7 } },
  },
];

describe("stranded deliveries: when a consumer is created again", () => {
  it.each(cases)("$name", (c) => {
    expect(verdict(c.last, look(c.now), HOLD)).toEqual(c.verdict);
  });
});
