import { confirmingAck, PipelinedPublisher } from "@hookpost/core";
import { AckPolicy, type JsMsg } from "nats";
import { beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";

/**
 * A confirmed ack is one the consumer's leader answered. While a consumer has no leader (an
 * election: only a leader listens for acks) the server answers "503 no responders", which
 * confirmed nothing: the ack is sent again until a leader answers. (One server here: the consumer
 * is deleted, then created again, as a leader that goes and a successor that comes.)
 */

const nats = useNats();

beforeAll(async () => {
  const jsm = await nats.nc.jetstreamManager();
  await jsm.streams.add({ name: "CA", subjects: ["ca.>"] });
  await jsm.consumers.add("CA", { durable_name: "C", ack_policy: AckPolicy.Explicit, ack_wait: 60e9 });
  await nats.nc.jetstream().publish("ca.x", "m");
});

describe("confirmingAck", () => {
  it("sends an ack again while nobody leads its consumer, and is confirmed once a leader answers", async () => {
    const jsm = await nats.nc.jetstreamManager();
    const msgs: JsMsg[] = [];
    for await (const m of nats.nc.jetstream().fetch("CA", "C", { batch: 1, expires: 5000 })) msgs.push(m);
    const config = (await jsm.consumers.info("CA", "C")).config;
    await jsm.consumers.delete("CA", "C");

    const pipe = new PipelinedPublisher(nats.nc, 2000);
    try {
      const c = confirmingAck(msgs[0]!, quietLogger, pipe);
      c.msg.ack();
      let confirmed = false;
      void c.confirmed().then(() => {
        confirmed = true;
      });
      // A 503 comes back within a millisecond, and was taken for a confirmation; now the ack
      // goes again (after 100, 200, 400 ms, ...) until a leader answers.
      // not a wait: asserts an absence (no confirmation) over a second of 503 answers
      await new Promise((r) => setTimeout(r, 1000));
      expect(confirmed).toBe(false);
      await jsm.consumers.add("CA", config);
      await until(() => confirmed, { message: "the ack confirmed by the consumer's new leader" });
    } finally {
      pipe.close();
    }
  });
});
