import { join } from "node:path";
import type { BreakerReport, HealthSummary } from "@hookpost/core";
import type { Subscription } from "nats";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ROOT, type ServiceProcess, spawnNode } from "../helpers/service-process.js";
import { until } from "../helpers/until.js";
import { destination, type Pipeline, pipeline, publishCall, track, useReceivers } from "./helpers.js";

/**
 * The machine's clock jumps back an hour under a running dispatcher (an NTP step, a virtual
 * machine restored from a snapshot): what it measures as durations must not stop for that hour.
 * The dispatcher runs as a process of its own whose wall clock the test sets back
 * (helpers/clock-behind.ts); the test's own clock is left alone.
 */

let p: Pipeline;
let proc: ServiceProcess | undefined;
const { receiver } = useReceivers();

beforeAll(async () => {
  p = await pipeline();
});
afterEach(async () => {
  proc?.proc.kill("SIGTERM");
  await proc?.exited;
  proc = undefined;
});
afterAll(async () => {
  await p?.close();
});

async function dispatcher(env: Record<string, string> = {}): Promise<ServiceProcess> {
  proc = spawnNode(
    [
      "--conditions=@hookpost/source",
      "--import",
      "tsx",
      "--import",
      join(ROOT, "test/helpers/clock-behind.ts"),
      join(ROOT, "services/dispatcher/main.ts"),
    ],
    {
      NATS_URL: p.server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "off",
      LOG_LEVEL: "info",
      RETRY_BASE_DELAY: "100ms",
      ...env,
    },
  );
  await proc.waitFor("delivering: every partition pulled", 50_000);
  return proc;
}

/** Sets the dispatcher's clock an hour back; resolves once it is. */
async function setClockBack(d: ServiceProcess): Promise<void> {
  d.proc.kill("SIGUSR2");
  await d.waitFor("clock set back");
}

describe("the clock jumps back an hour", () => {
  it("every consumer is pulled again at once: calls stored after the jump are routed and delivered", async () => {
    const r = await receiver();
    await p.store.putDestination(destination({ id: "jump", sourceIds: ["jump"], urls: [r.url()] }));
    const d = await dispatcher();
    await publishCall(p.js, track({ sourceId: "jump" }));
    await r.waitFor(1);

    // Pull requests the dispatcher sends, and when each ends at the server (its `expires`).
    const ends: number[] = [];
    const pulls = p.nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.>", {
      callback: (_err, m) => {
        const req = JSON.parse(new TextDecoder().decode(m.data)) as { expires?: number };
        ends.push(performance.now() + (req.expires ?? 0) / 1e6);
      },
    });
    try {
      await until(() => ends.length > 0, { message: "a pull request" });
      await setClockBack(d);
      const openAtJump = Math.max(...ends);
      // The requests open at the jump have ended at the server: only new ones bring calls now.
      await until(() => performance.now() > openAtJump + 100, {
        message: "the pulls open at the jump ended",
      });
      const after = [track({ sourceId: "jump" }), track({ sourceId: "jump" })];
      for (const call of after) await publishCall(p.js, call);
      await until(() => after.every((c) => r.messageIds().has(c.messageId)), {
        timeout: 15_000,
        message: "calls stored after the clock jumped delivered",
      });
      expect(r.messageIds().size).toBe(3);
    } finally {
      pulls.unsubscribe();
    }
  });

  it("an open breaker still lets its probe go after its cool-down, and the recovered endpoint gets its calls", async () => {
    const r = await receiver();
    let failing = true;
    r.respond = () => ({ status: failing ? 500 : 200 });
    await p.store.putDestination(destination({ id: "bjump", sourceIds: ["bjump"], urls: [r.url()] }));
    // The breaker as the replica reports it to health (once a second).
    const reports: BreakerReport[] = [];
    const health: Subscription = p.nc.subscribe("hookpost.health.>", {
      callback: (_err, m) => {
        const report = (m.json() as HealthSummary).destinations?.bjump?.breaker;
        if (report) reports.push(report);
      },
    });
    try {
      const d = await dispatcher({ BREAKER_FAILURES: "2" });
      for (let i = 0; i < 2; i++) await publishCall(p.js, track({ sourceId: "bjump" }));
      // Two failures in a row: open for 5 s.
      await until(() => reports.some((b) => b.state === "open"), { message: "the breaker open" });
      await setClockBack(d);
      failing = false;
      const after = [track({ sourceId: "bjump" }), track({ sourceId: "bjump" })];
      for (const call of after) await publishCall(p.js, call);
      await until(() => after.every((c) => r.messageIds().has(c.messageId)), {
        timeout: 20_000,
        message: "calls sent after the clock jumped delivered once the endpoint answers",
      });
    } finally {
      health.unsubscribe();
    }
  });
});
