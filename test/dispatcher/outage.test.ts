import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { destination, pipelineWithReceiver, publishCall, track } from "./helpers.js";

/** A NATS outage: the dispatcher reconnects on its own and picks up where it left off. */

const t = pipelineWithReceiver();

describe("NATS outage", () => {
  it("keeps delivering after nats-server restarts", async () => {
    await t.p.putDestination(destination({ id: "outage", sourceIds: ["out"], urls: [t.rx.url()] }));
    await publishCall(t.p.js, track({ sourceId: "out" }));
    await t.rx.waitFor(1);
    await t.p.server.restart();
    const after = track({ sourceId: "out" });
    await until(
      () =>
        publishCall(t.p.js, after).then(
          () => true,
          () => false,
        ),
      { timeout: 15_000, message: "publishing after the restart" },
    );
    await until(() => t.rx.messageIds().has(after.messageId), {
      timeout: 15_000,
      message: "delivery after the restart",
    });
    expect(t.rx.messageIds().size).toBe(2);
  });
});
