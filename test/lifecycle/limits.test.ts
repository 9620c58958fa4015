import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { destination, type Pipeline, pipeline, publishCall, Receiver, track } from "../dispatcher/helpers.js";
import { waitForRevision } from "../helpers/revisions.js";
import { type ServiceProcess, spawnService } from "../helpers/service-process.js";
import { until } from "../helpers/until.js";

/**
 * rate_limit_per_second and max_in_flight hold across two dispatcher replicas (real child
 * processes), and waiting for the limit neither loses nor dead-letters anything.
 */

let p: Pipeline;
const replicas: ServiceProcess[] = [];
const ops: string[] = [];
const receivers: Receiver[] = [];

beforeAll(async () => {
  p = await pipeline();
  for (let i = 0; i < 2; i++) {
    const proc = spawnService("services/dispatcher/main.ts", {
      NATS_URL: p.server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8,::1/128",
      OPS_ADDR: "127.0.0.1:0",
      ACK_WAIT: "5s",
      PULL_EXPIRES: "1s",
      RETRY_BASE_DELAY: "100ms",
      LOG_LEVEL: "info",
    });
    replicas.push(proc);
    ops.push(String((await proc.waitFor("dispatcher started", 60_000)).ops));
  }
  // Both replicas see each other, so each takes half of a limit.
  await until(
    async () => {
      const bodies = await Promise.all(ops.map((o) => fetch(`http://${o}/readyz`).then((r) => r.json())));
      return bodies.every((b) => (b as { replicas?: number }).replicas === 2);
    },
    { timeout: 30_000, message: "both replicas registered" },
  );
}, 120_000);

afterAll(async () => {
  for (const r of replicas) r.proc.kill("SIGTERM");
  await Promise.all(replicas.map((r) => r.exited));
  await Promise.all(receivers.map((r) => r.close()));
  await p?.close();
});

/** Publishes `count` calls for a new destination and waits until each one was delivered. */
async function run(
  sourceId: string,
  limits: { rateLimitPerSecond?: number; maxInFlight?: number },
  count: number,
  rx: Receiver,
) {
  const revision = await p.store.putDestination(
    destination({ id: sourceId, sourceIds: [sourceId], urls: [rx.url()], ...limits }),
  );
  await waitForRevision(revision, ops);
  const calls = Array.from({ length: count }, () => track({ sourceId }));
  await Promise.all(calls.map((c) => publishCall(p.js, c)));
  await until(() => calls.every((c) => rx.messageIds().has(c.messageId)), {
    timeout: 120_000,
    message: `${count} deliveries to ${sourceId}`,
  });
  expect(await p.deadLetters.list(sourceId)).toHaveLength(0);
  return rx.requests.map((r) => r.at).sort((a, b) => a - b);
}

/** The most requests in any window of `ms` starting at a request. */
function maxInWindow(times: number[], ms: number): number {
  let best = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (j < times.length && times[j]! < times[i]! + ms) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

describe("per-destination limits across 2 replicas", () => {
  it("rate_limit_per_second 20: at most 22/s over any 5 s window, nothing lost or dead-lettered", async () => {
    const rx = await Receiver.http();
    receivers.push(rx);
    const times = await run("rl", { rateLimitPerSecond: 20 }, 200, rx);
    const peak = maxInWindow(times, 5000);
    console.log(
      `rate limit 20/s: peak ${peak} in 5 s (${(peak / 5).toFixed(1)}/s), ${times.length} requests`,
    );
    expect(peak).toBeLessThanOrEqual(110);
    expect(rx.requests).toHaveLength(200);
  }, 180_000);

  it("max_in_flight 3: the receiver never has more than 3 requests open", async () => {
    const rx = await Receiver.http();
    receivers.push(rx);
    rx.respond = () => ({ status: 200, delayMs: 200 });
    const times = await run("mif", { maxInFlight: 3 }, 40, rx);
    // A request is open at the receiver from its arrival until its answer 200 ms later.
    const open = Math.max(...times.map((t) => times.filter((u) => u <= t && t < u + 200).length));
    console.log(`max_in_flight 3: at most ${open} open at once`);
    expect(open).toBeLessThanOrEqual(3);
  }, 180_000);
});
