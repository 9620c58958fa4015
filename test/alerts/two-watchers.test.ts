import { AttemptLog, DEFAULT_TOPOLOGY, DELIVERIES_STREAM, ensureTopology } from "@hookpost/core";
import {
  AlertState,
  conditionKey,
  DispatcherMetrics,
  eventId,
  OperatorEventPublisher,
} from "@hookpost/dispatcher";
import { describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { useNats } from "../helpers/use-nats.js";
import { PAGER } from "./pager.js";

// During a hand-over two dispatcher replicas may both believe they watch destinations for a
// moment. Each then makes the same announcement; what keeps it single: the state is written
// compare-and-set (the second writer is refused and reads the first one's state), and the event,
// whose id is derived from what it announces, is stored once by JetStream (Nats-Msg-Id).
// Real nats-server; the two watchers are two independent sets of the dispatcher's parts.

const f = useNats();

const webhook = PAGER;

describe("two replicas watching at once", () => {
  it("one state write wins; the other reads it instead of overwriting it", async () => {
    const a = await AlertState.open(f.nc, { replicas: 1, logger: quietLogger });
    const b = await AlertState.open(f.nc, { replicas: 1, logger: quietLogger });
    await a.load();
    await b.load();
    const key = conditionKey("pager", "crm");
    expect(await a.put(key, { seq: 1, failing: 1000, lastFailingEvent: 1000 })).toBe(true);
    // B computed the same transition from the state before A's write: refused.
    expect(await b.put(key, { seq: 1, failing: 1001, lastFailingEvent: 1001 })).toBe(false);
    expect(b.get(key)).toEqual({ seq: 1, failing: 1000, lastFailingEvent: 1000 });
    // From there B goes on: its next transition is written on top of A's.
    expect(await b.put(key, { seq: 2, lastFailingEvent: 5000 })).toBe(true);
    expect(await a.put(key, { seq: 2, lastFailingEvent: 5001 })).toBe(false);
    expect(a.get(key)).toEqual({ seq: 2, lastFailingEvent: 5000 });
  });

  it("the same event published by both is stored once", async () => {
    const jsm = await f.nc.jetstreamManager();
    await ensureTopology(jsm, DEFAULT_TOPOLOGY);
    const metrics = new DispatcherMetrics(async () => new Map());
    const publisher = () =>
      new OperatorEventPublisher({
        js: f.nc.jetstream(),
        partitions: 8,
        answering: () => false,
        attemptLog: new AttemptLog(f.nc, { enabled: false, bodies: false, logger: quietLogger }),
        metrics,
        logger: quietLogger,
      });
    const id = eventId("destination.failing", "pager", webhook.createdAt, "crm", "2026-01-01", 1);
    const event = (at: string) => ({
      id,
      type: "destination.failing" as const,
      body: JSON.stringify({ type: "destination.failing", timestamp: at, data: {} }),
    });
    const before = (await jsm.streams.info(DELIVERIES_STREAM)).state.messages;
    // Decided a few milliseconds apart: the bodies differ, the id does not.
    expect(await publisher().emit(event("2026-12-01T10:00:00.000Z"), [webhook])).toBe(true);
    expect(await publisher().emit(event("2026-12-01T10:00:00.004Z"), [webhook])).toBe(true);
    expect((await jsm.streams.info(DELIVERIES_STREAM)).state.messages).toBe(before + 1);
    // Another announcement (the next transition) is another event.
    const next = {
      ...event("2026-12-01T10:05:00.000Z"),
      id: eventId("destination.recovered", "pager", webhook.createdAt, "crm", "2026-01-01", 2),
    };
    expect(await publisher().emit(next, [webhook])).toBe(true);
    expect((await jsm.streams.info(DELIVERIES_STREAM)).state.messages).toBe(before + 2);
    // Counted as stored once each.
    const counted = (await metrics.operatorEvents.get()).values.reduce((n, v) => n + v.value, 0);
    expect(counted).toBe(2);
  });
});
