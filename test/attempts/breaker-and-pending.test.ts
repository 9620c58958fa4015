import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@hookpost/contract";
import { BreakerState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  AttemptLog,
  DELIVERIES_STREAM,
  deliverySubjects,
  FIRST_TIME_HEADER,
  laneSubject,
  legacyDeliverySubject,
  ORDERED_STREAM,
  orderedSubject,
  partitionSubject,
} from "@hookpost/core";
import { headers } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hookpostExitsZero } from "../cli/run-cli.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { failure } from "../ingest/harness.js";

// What ListDestinationHealth (and the CLI) tell about a destination beside its deliveries: the
// circuit breaker as the dispatcher replicas report it, and the backlog wherever the calls are
// stored (shared-lane partitions, the destination's lane, the legacy subject, ORDERED). No
// dispatcher runs here: replicas' reports are written the way a dispatcher writes them (an
// AttemptLog with health), and stored calls are put on their subjects directly, so nothing moves
// them while the test looks. test/dispatcher/breaker-health.test.ts does it with a real dispatcher.

const KIB = 1024;
let stack: Stack;
const logs: AttemptLog[] = [];

beforeAll(async () => {
  stack = await Stack.start({
    dispatchers: 0,
    ingest: { quota: { maxPendingBytes: 64 * KIB, maxRate: 10_000, burst: 20_000, refreshMs: 200 } },
  });
});

afterAll(async () => {
  await Promise.all(logs.map((l) => l.close()));
  await stack?.close();
});

/** A dispatcher replica's attempt log, as far as health goes. */
function replica(id: string): AttemptLog {
  const log = new AttemptLog(stack.nc, {
    enabled: true,
    bodies: false,
    logger: quietLogger,
    health: { replica: id, everyMs: 50 },
  });
  logs.push(log);
  return log;
}

async function healthOf(id: string) {
  return (await stack.admin.listDestinationHealth({ destinationId: id })).destinations[0]!;
}

const cli = (args: string[]) =>
  hookpostExitsZero(args, { HOOKPOST_ENDPOINT: stack.ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN });

describe("destination health", () => {
  it("shows the breaker open until the latest cool-down while any replica's is open, in the API and the CLI", async () => {
    const src = await stack.source("breakers");
    await stack.destination({ id: "brk", sourceIds: [src.id] });
    await stack.destination({ id: "brk-ok", sourceIds: [src.id] });
    expect((await healthOf("brk")).breakerState).toBe(BreakerState.CLOSED);

    const a = replica("replica-a");
    const b = replica("replica-b");
    // Whole seconds: the CLI prints times to the millisecond, the comparison stays exact.
    const soon = Math.ceil(Date.now() / 1000) * 1000 + 60_000;
    a.breaker("brk", { state: "open", until: soon, failures: 5 });
    b.breaker("brk", { state: "open", until: soon + 30_000, failures: 7 });
    b.breaker("brk-ok", { state: "closed", failures: 0 });
    await until(async () => (await healthOf("brk")).breakerReplicas === 2, {
      message: "both replicas' breakers in health",
    });
    const h = await healthOf("brk");
    expect(h.breakerState).toBe(BreakerState.OPEN);
    expect(timestampDate(h.breakerOpenUntil!).getTime()).toBe(soon + 30_000);
    expect((await healthOf("brk-ok")).breakerState).toBe(BreakerState.CLOSED);

    const one = (await cli(["destinations", "health", "brk"])).stdout;
    expect(one).toMatch(
      new RegExp(`^Breaker:\\s+open until ${new Date(soon + 30_000).toISOString()} \\(2 replicas\\)$`, "m"),
    );
    const all = (await cli(["destinations", "health"])).stdout;
    expect(all).toMatch(/BREAKER/);
    expect(all).toMatch(/^brk\s.*open until \d{4}-/m);
    expect(all).toMatch(/^brk-ok\s.*\bclosed\b/m);

    // Replica b's probe went through; replica a shuts down: closed everywhere.
    b.breaker("brk", { state: "closed", failures: 0 });
    await until(async () => (await healthOf("brk")).breakerReplicas === 1, { message: "b's breaker closed" });
    expect(timestampDate((await healthOf("brk")).breakerOpenUntil!).getTime()).toBe(soon);
    await a.close();
    await until(async () => (await healthOf("brk")).breakerState === BreakerState.CLOSED, {
      message: "a's breaker gone with a",
    });
    const after = await healthOf("brk");
    expect(after.breakerReplicas).toBe(0);
    expect(after.breakerOpenUntil).toBeUndefined();
  });

  it("counts the backlog on every subject that stores the destination's calls, and the oldest of them", async () => {
    const src = await stack.source("pending");
    await stack.destination({ id: "pend", sourceIds: [src.id], enabled: false });
    // Its id starts another's: neither's calls count for the other.
    await stack.destination({ id: "pend-x", sourceIds: [src.id], enabled: false });
    const js = stack.nc.jetstream();
    // ORDERED first: the oldest call is there, not on DELIVERIES.
    const first = await js.publish(orderedSubject(3, "pend", "u1hash"), "{}");
    await js.publish(orderedSubject(3, "pend", "u2hash"), "{}");
    for (const subject of [
      partitionSubject(0, "pend"),
      partitionSubject(7, "pend"),
      laneSubject("pend"),
      legacyDeliverySubject("pend"),
      partitionSubject(0, "pend-x"),
      orderedSubject(3, "pend-x", "u1hash"),
    ])
      await js.publish(subject, "{}");
    // Parked: its lane message is the newest, but it was first stored an hour ago.
    const parkedFirst = Date.now() - 3_600_000;
    const h = headers();
    h.set(FIRST_TIME_HEADER, String(parkedFirst));
    await js.publish(laneSubject("pend-x"), "{}", { headers: h });
    const jsm = await stack.nc.jetstreamManager();
    const stored = await jsm.streams.getMessage(ORDERED_STREAM, { seq: first.seq });

    const pend = await healthOf("pend");
    expect(pend.backlog).toBe(6n);
    expect(timestampDate(pend.oldestWaitingTime!).getTime()).toBe(stored.time.getTime());
    const other = await healthOf("pend-x");
    expect(other.backlog).toBe(3n);
    expect(timestampDate(other.oldestWaitingTime!).getTime()).toBe(parkedFirst);
    // A page of more than a few destinations is counted from one look at DELIVERIES: same figures.
    for (let i = 0; i < 3; i++) await stack.destination({ id: `pend-quiet-${i}`, sourceIds: [src.id] });
    const page = (await stack.admin.listDestinationHealth({})).destinations;
    expect(page.length).toBeGreaterThan(4);
    for (const d of page) {
      const single = await healthOf(d.destinationId);
      expect([d.destinationId, d.backlog, d.oldestWaitingTime]).toEqual([
        single.destinationId,
        single.backlog,
        single.oldestWaitingTime,
      ]);
    }
    expect(page.find((d) => d.destinationId === "pend")?.backlog).toBe(6n);
    expect((await cli(["destinations", "health", "pend"])).stdout).toMatch(
      /^Backlog:\s+6, oldest waiting since/m,
    );
  });

  it("charges calls waiting on partitions and lanes to the destination's sources (quota)", async () => {
    const a = await stack.source("quota-a");
    const b = await stack.source("quota-b");
    await stack.destination({ id: "quota-dest", sourceIds: [a.id], enabled: false });
    const js = stack.nc.jetstream();
    const blob = "x".repeat(4 * KIB);
    // 80 KiB waiting for A's destination, over its 64 KiB: half parked in its lane, half on a partition.
    for (let i = 0; i < 10; i++) {
      await js.publish(laneSubject("quota-dest"), blob);
      await js.publish(partitionSubject(i % 8, "quota-dest"), blob);
    }
    await until(
      async () =>
        (await failure(a.client.track({ userId: "u", event: "E" }))).code === Code.RESOURCE_EXHAUSTED,
      { message: "A refused for its calls on DELIVERIES" },
    );
    await b.client.track({ userId: "u", event: "E" });
    const jsm = await stack.nc.jetstreamManager();
    await jsm.streams.purge(DELIVERIES_STREAM, { filter: laneSubject("quota-dest") });
    await jsm.streams.purge(DELIVERIES_STREAM, { filter: deliverySubjects("quota-dest") });
    await until(async () => (await a.client.track({ userId: "u", event: "E" })).messageId, {
      message: "A accepted again once its calls are gone",
    });
  });
});
