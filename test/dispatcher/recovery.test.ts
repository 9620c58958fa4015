import {
  type BreakerReport,
  EVENTS_STREAM,
  type HealthSummary,
  isNotFound,
  ROUTER_CONSUMER,
} from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { destination, pipelineWithDispatcherPerTest, publishCall, track } from "./helpers.js";

/**
 * Back to full capacity after faults that leave the dispatcher running: a consumer deleted behind
 * its back, a destination deleted while its breaker holds it back. "Running" is not enough: every
 * part must work again, and nothing of what is gone may linger. (A clock that jumps: clock-jump.test.ts.)
 */

const t = pipelineWithDispatcherPerTest();

/** Deletes a consumer; nats-server 2.9 may answer an error for one it is writing, so until it is gone. */
async function deleteConsumer(stream: string, name: string): Promise<void> {
  await until(
    () =>
      t.p.jsm.consumers.delete(stream, name).then(
        () => true,
        (err: unknown) => isNotFound(err),
      ),
    { message: `consumer ${name} deleted` },
  );
}

describe("recovery after faults", () => {
  it("the router consumer deleted under a running dispatcher is created again, and calls are routed and delivered", async () => {
    const r = await t.receiver();
    await t.p.store.putDestination(destination({ id: "rlost", sourceIds: ["rlost"], urls: [r.url()] }));
    t.d = await t.p.dispatcher();
    await publishCall(t.p.js, track({ sourceId: "rlost" }));
    await r.waitFor(1);

    // Nothing but a start created it: calls stayed on EVENTS, never routed, until a restart.
    await deleteConsumer(EVENTS_STREAM, ROUTER_CONSUMER);
    const after = [track({ sourceId: "rlost" }), track({ sourceId: "rlost" })];
    for (const call of after) await publishCall(t.p.js, call);
    await until(() => after.every((c) => r.messageIds().has(c.messageId)), {
      timeout: 20_000,
      message: "calls stored after the router consumer was deleted delivered",
    });
    expect(r.messageIds().size).toBe(3);
  });

  it("a destination deleted while its breaker is open: the replica reports that breaker closed, not open for as long as it runs", async () => {
    const r = await t.receiver();
    r.respond = () => ({ status: 500 });
    await t.p.store.putDestination(destination({ id: "bgone", sourceIds: ["bgone"], urls: [r.url()] }));
    // The breaker as the replica reports it to health (once a second).
    const reports: BreakerReport[] = [];
    const health = t.p.nc.subscribe("hookpost.health.>", {
      callback: (_err, m) => {
        const report = (m.json() as HealthSummary).destinations?.bgone?.breaker;
        if (report) reports.push(report);
      },
    });
    try {
      t.d = await t.p.dispatcher({ breakerFailures: 2 });
      for (let i = 0; i < 2; i++) await publishCall(t.p.js, track({ sourceId: "bgone" }));
      await until(() => reports.at(-1)?.state === "open", { message: "the breaker open" });
      await t.p.store.deleteDestination("bgone");
      // Forgotten silently, it was reported open again every minute for as long as the replica
      // ran: a destination created again with that id showed a breaker it never had.
      await until(() => reports.at(-1)?.state === "closed", {
        message: "the deleted destination's breaker reported closed",
      });
    } finally {
      health.unsubscribe();
    }
  });
});
