import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { destination, type Pipeline, pipeline, publishCall, Receiver, track } from "./helpers.js";

/** A NATS outage: the dispatcher reconnects on its own and picks up where it left off. */

let p: Pipeline;
let rx: Receiver;

beforeAll(async () => {
  p = await pipeline();
  await p.dispatcher();
  rx = await Receiver.http();
});

afterAll(async () => {
  await p?.close();
  await rx?.close();
});

describe("NATS outage", () => {
  it("keeps delivering after nats-server restarts", async () => {
    await p.putDestination(destination({ id: "outage", sourceIds: ["out"], urls: [rx.url()] }));
    await publishCall(p.js, track({ sourceId: "out" }));
    await rx.waitFor(1);
    await p.server.restart();
    const after = track({ sourceId: "out" });
    await until(
      () =>
        publishCall(p.js, after).then(
          () => true,
          () => false,
        ),
      { timeout: 15_000, message: "publishing after the restart" },
    );
    await until(() => rx.messageIds().has(after.messageId), {
      timeout: 15_000,
      message: "delivery after the restart",
    });
    expect(rx.messageIds().size).toBe(2);
  });
});
