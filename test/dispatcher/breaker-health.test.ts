import { timestampDate } from "@bufbuild/protobuf/wkt";
import { BreakerState, type DestinationHealth } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// The circuit breaker as an operator sees it, end to end: a real dispatcher's breaker opens on a
// failing endpoint and closes once it recovers, and ListDestinationHealth says so each time.

let stack: Stack;

beforeAll(async () => {
  // Three failures open the breaker; its first cool-down is 5 s (breaker.ts).
  stack = await Stack.start({
    dispatcher: {
      breakerFailures: 3,
      retryBaseDelayMs: 50,
      laneSweepMs: 200,
      topology: { ...DEFAULT_TOPOLOGY },
    },
  });
});

afterAll(async () => {
  await stack?.close();
});

async function healthOf(id: string): Promise<DestinationHealth> {
  return (await stack.admin.listDestinationHealth({ destinationId: id })).destinations[0]!;
}

describe("breaker in destination health", () => {
  it("an endpoint answering 500 opens the breaker (health: open until …); once it answers 200 the probe closes it", async () => {
    const src = await stack.source("flaky");
    let failing = true;
    stack.receiver.respond = () => ({ status: failing ? 500 : 200 });
    await stack.destination({ id: "flaky", sourceIds: [src.id] });
    const calls = 5;
    for (let i = 0; i < calls; i++) await src.client.track({ userId: `u-${i}`, event: "Flaky" });

    let h = await healthOf("flaky");
    // Open, with every call stored: a call the router was attempting itself (direct delivery: not
    // on DELIVERIES) when the third failure opened the breaker is stored once its attempt ends.
    await until(
      async () => {
        h = await healthOf("flaky");
        return h.breakerState === BreakerState.OPEN && h.backlog >= BigInt(calls);
      },
      { timeout: 20_000, message: "health says the breaker is open, with every call in the backlog" },
    );
    const openedAt = Date.now();
    expect(h.breakerReplicas).toBe(1);
    const untilMs = timestampDate(h.breakerOpenUntil!).getTime();
    expect(untilMs).toBeGreaterThan(openedAt);
    expect(untilMs).toBeLessThanOrEqual(openedAt + 5_000);
    // The calls it holds back are stored, and counted (one being parked may show on both sides).
    expect(h.backlog).toBeGreaterThanOrEqual(BigInt(calls));

    failing = false;
    await until(
      async () => {
        h = await healthOf("flaky");
        return h.breakerState === BreakerState.CLOSED && h.deliveries5m === calls;
      },
      { timeout: 30_000, message: "health says the breaker closed and every call was delivered" },
    );
    expect(h.breakerReplicas).toBe(0);
    expect(h.breakerOpenUntil).toBeUndefined();
    await until(async () => (await healthOf("flaky")).backlog === 0n, { message: "the backlog drained" });
  });
});
