import { ConnectionState, PipelinedPublisher } from "@hookpost/core";
import { failedRetryMs, Puller } from "@hookpost/dispatcher";
import { AckPolicy, connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsServer } from "../helpers/nats-server.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";

/**
 * A message whose handler throws is a bug's victim (a poison call), never an endpoint's failure:
 * it stays on its stream for a fixed replica, and comes back later each time, so that a batch of
 * them does not take every slot of the consumer every few seconds while good messages wait.
 */

let server: NatsServer;
let nc: NatsConnection;

beforeAll(async () => {
  server = await NatsServer.start();
  nc = await connect({ servers: server.url });
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: "POISON", subjects: ["poison.>"] });
  await jsm.consumers.add("POISON", { durable_name: "c", ack_policy: AckPolicy.Explicit, ack_wait: 30e9 });
});

afterAll(async () => {
  await nc?.close();
  await server?.stop();
});

describe("a message whose handler throws", () => {
  it("comes back later at each delivery, and stays on its stream; the others are handled meanwhile", async () => {
    const BASE_MS = 250;
    const poison: Array<{ at: number; count: number }> = [];
    const handled: string[] = [];
    const acks = new PipelinedPublisher(nc, 2000);
    const puller = new Puller({
      js: nc.jetstream(),
      stream: "POISON",
      consumer: "c",
      concurrency: 4,
      expiresMs: 1000,
      acks,
      connection: new ConnectionState(nc),
      logger: quietLogger,
      failedRetryMs: BASE_MS,
      handle: async (msg) => {
        if (msg.subject === "poison.bad") {
          poison.push({ at: performance.now(), count: msg.info.deliveryCount });
          throw new Error("a bug");
        }
        handled.push(msg.subject);
        msg.ack();
      },
    });
    puller.resume();
    const js = nc.jetstream();
    await js.publish("poison.bad", "x");
    for (let i = 0; i < 3; i++) await js.publish(`poison.good${i}`, "y");
    await until(() => poison.length >= 4, { message: "4 deliveries of the poison message" });
    puller.pause();
    await puller.drain();
    acks.close();

    expect(handled.sort()).toEqual(["poison.good0", "poison.good1", "poison.good2"]);
    expect(poison.slice(0, 4).map((p) => p.count)).toEqual([1, 2, 3, 4]);
    // Waits of 250, 500 and 1 000 ms (a little early at most: timers and the server's clock).
    for (let i = 1; i < 4; i++) {
      expect(poison[i]!.at - poison[i - 1]!.at).toBeGreaterThanOrEqual(BASE_MS * 2 ** (i - 1) * 0.9);
    }
    // Not lost: still on the stream, the good ones acked away.
    const info = await (await nc.jetstreamManager()).consumers.info("POISON", "c");
    expect(info.num_ack_pending + info.num_pending).toBe(1);
  });

  it("waits at most 5 minutes between tries", () => {
    expect(failedRetryMs(5000, 1)).toBe(5000);
    expect(failedRetryMs(5000, 3)).toBe(20_000);
    expect(failedRetryMs(5000, 7)).toBe(300_000);
    expect(failedRetryMs(5000, 10_000)).toBe(300_000);
  });
});
