import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// Two dispatcher replicas share one destination's deliveries; each writes its own health
// summaries. Ingest's figures add them up: every delivery counted once, whichever replica made it.

let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start({ dispatchers: 2 });
});

afterAll(async () => {
  await stack?.close();
});

describe("health across replicas", () => {
  it("counts each delivery once, whichever replica made it", async () => {
    const src = await stack.source("health-replicas");
    let n = 0;
    // Every fifth call is refused for good (400): failures counted too, nothing retried.
    stack.receiver.respond = (req) =>
      req.url === "/shared" && ++n % 5 === 0 ? { status: 400 } : { status: 200 };
    const dest = await stack.destination({ sourceIds: [src.id], urls: [stack.receiver.url("/shared")] });
    const calls = 300;
    const batch = Array.from({ length: calls }, (_, i) => ({
      call: { case: "track" as const, value: { userId: `u-${i}`, event: "Shared" } },
    }));
    await src.client.batch({ calls: batch.slice(0, 150) });
    await src.client.batch({ calls: batch.slice(150) });
    await stack.receiver.waitFor(calls, 30_000);
    // Both replicas delivered some of them (otherwise this test would not test anything).
    const byReplica = await Promise.all(
      stack.dispatchers.map(async (d) => {
        const m = await d.metrics.deliveries.get();
        return m.values.filter((v) => v.labels.destination === dest.id).reduce((a, v) => a + v.value, 0);
      }),
    );
    expect(byReplica.every((x) => x > 0)).toBe(true);

    let h: Awaited<ReturnType<typeof stack.admin.listDestinationHealth>>["destinations"][number] | undefined;
    await until(
      async () => {
        [h] = (await stack.admin.listDestinationHealth({ destinationId: dest.id })).destinations;
        return (h?.deliveries5m ?? 0) + (h?.failures5m ?? 0) === calls;
      },
      { timeout: 20_000, message: "both replicas' summaries merged" },
    );
    expect(h).toMatchObject({ deliveries5m: 240, failures5m: 60, deliveries1h: 240, failures1h: 60 });
    expect(h!.successRate1h).toBeCloseTo(0.8, 6);
    expect(h!.incomingPerSecond).toBeCloseTo(calls / 60, 6);
    expect(h!.lastFailureReason).toBe("400 is not retried");
    expect(h!.nextRetryTime).toBeUndefined();
  });
});
