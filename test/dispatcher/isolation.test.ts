import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { destination, type Pipeline, percentile, pipeline, publishCall, Receiver, track } from "./helpers.js";

/**
 * Destination isolation: a destination whose endpoint never answers (every attempt times out and
 * is retried) must not slow deliveries to a healthy destination of the same source.
 */

let p: Pipeline;
const receivers: Receiver[] = [];

beforeAll(async () => {
  p = await pipeline();
  await p.dispatcher({
    webhookTimeoutMs: 300,
    retryBaseDelayMs: 100,
    topology: { retryMaxDelayMs: 500 } as never,
  });
});

afterAll(async () => {
  await p?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

/** Publishes `count` calls at a steady pace; returns the healthy receiver's latencies (ms). */
async function measure(rx: Receiver, count: number, everyMs: number): Promise<number[]> {
  const sent = new Map<string, number>();
  const before = rx.requests.length;
  for (let i = 0; i < count; i++) {
    const call = track({ sourceId: "iso" });
    sent.set(call.messageId, Date.now());
    await publishCall(p.js, call);
    await sleep(everyMs); // not a wait: paces the publisher (a steady load)
  }
  await until(() => rx.requests.length - before >= count, { timeout: 20_000, message: "healthy deliveries" });
  return rx.requests
    .slice(before)
    .filter((r) => sent.has(String(r.headers["idempotency-key"])))
    .map((r) => r.at - sent.get(String(r.headers["idempotency-key"]))!);
}

describe("isolation", () => {
  it("a destination that always times out does not delay a healthy one", async () => {
    const healthy = await Receiver.http();
    const dead = await Receiver.http();
    receivers.push(healthy, dead);
    dead.respond = () => ({ hang: true });
    const healthyDest = destination({ id: "healthy", sourceIds: ["iso"], urls: [healthy.url()] });
    const deadDest = destination({ id: "dead", sourceIds: ["iso"], urls: [dead.url()] });
    await p.putDestination(healthyDest);
    await measure(healthy, 50, 2); // warm-up

    // Latency tails on a shared 2-core machine are noisy (other processes stall the event loop for
    // 100+ ms now and then). A broken isolation shows in every round (healthy deliveries would wait
    // behind 300 ms timeouts), noise does not: the property holds when one of 3 rounds shows it.
    const rounds: string[] = [];
    let held = false;
    for (let round = 1; round <= 3 && !held; round++) {
      await p.applied(await p.store.deleteDestination("dead"));
      const alone = await measure(healthy, 300, 5);
      await p.putDestination(deadDest);
      const attemptsBefore = dead.requests.length;
      const beside = await measure(healthy, 300, 5);
      const busy = dead.requests.length - attemptsBefore;
      const [p50a, p99a, p50b, p99b] = [
        percentile(alone, 50),
        percentile(alone, 99),
        percentile(beside, 50),
        percentile(beside, 99),
      ];
      const line =
        `round ${round}: healthy p50/p99 alone ${p50a}/${p99a} ms, beside a timing-out destination ` +
        `${p50b}/${p99b} ms (the dead endpoint saw ${busy} attempts meanwhile)`;
      console.log(line);
      rounds.push(line);
      // It really was tried and timed out; slow start (one request at a time) and its breaker
      // keep a dead endpoint to a few attempts, which is the point.
      expect(busy).toBeGreaterThanOrEqual(2);
      held = p99b <= Math.max(2 * p99a, p99a + 50) && p50b <= 2 * p50a + 5;
    }
    expect(held, rounds.join("\n")).toBe(true);
  });
});
