import { AckReplay, confirmingAck, PipelinedPublisher } from "@hookpost/core";
import { AckPolicy, type JsMsg } from "nats";
import { beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";

/**
 * Acks a consumer's dead leader confirmed but never stored: sent again when nats-server announces
 * the consumer's new leader (one server here: the test announces it as a cluster would).
 */

const nats = useNats();
const ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED";

beforeAll(async () => {
  const jsm = await nats.nc.jetstreamManager();
  await jsm.streams.add({ name: "AR", subjects: ["ar.>"] });
  for (const name of ["C1", "C2"])
    await jsm.consumers.add("AR", { durable_name: name, ack_policy: AckPolicy.Explicit, ack_wait: 60e9 });
  const js = nats.nc.jetstream();
  for (let i = 0; i < 4; i++) await js.publish("ar.x", `m${i}`);
});

async function pull(consumer: string, n: number): Promise<JsMsg[]> {
  const js = nats.nc.jetstream();
  const msgs: JsMsg[] = [];
  for await (const m of js.fetch("AR", consumer, { batch: n, expires: 5000 })) msgs.push(m);
  return msgs;
}

const replyOf = (m: JsMsg) => (m as unknown as { reply: string }).reply;

describe("AckReplay", () => {
  it("sends a consumer's recently confirmed acks again when its new leader is elected, once each when answered, and no other consumer's", async () => {
    const pipe = new PipelinedPublisher(nats.nc, 2000);
    const replay = new AckReplay(nats.nc, pipe, quietLogger);
    const jsm = await nats.nc.jetstreamManager();
    try {
      const [first, second, lost] = await pull("C1", 3);
      const [other] = await pull("C2", 1);
      for (const m of [first!, second!, other!]) {
        const c = confirmingAck(m, quietLogger, pipe, replay);
        c.msg.ack();
        await c.confirmed();
      }
      // A confirmation whose ack the dead leader never stored: the message is still pending.
      replay.confirmed(replyOf(lost!));
      expect((await jsm.consumers.info("AR", "C1")).num_ack_pending).toBe(1);

      const sent: string[] = [];
      const sniff = nats.nc.subscribe("$JS.ACK.AR.>", { callback: (_e, m) => sent.push(m.subject) });
      nats.nc.publish(`${ADVISORY}.AR.C1`);
      // The new leader takes the ack: nothing of C1 is pending any more.
      await until(async () => (await jsm.consumers.info("AR", "C1")).num_ack_pending === 0, {
        message: "the lost ack taken by C1's new leader",
      });
      // Each of C1's acks once more (answered: not again), C2's none: its leader did not change.
      await until(() => sent.length >= 3, { message: "C1's acks sent again" });
      // not a wait: asserts an absence (C2's ack, or a second round) over the replay's retry time
      await new Promise((r) => setTimeout(r, 500));
      sniff.unsubscribe();
      const c1 = [first!, second!, lost!].map(replyOf).sort();
      expect([...sent].sort()).toEqual(c1);
      expect((await jsm.consumers.info("AR", "C2")).num_ack_pending).toBe(0);
    } finally {
      replay.close();
      pipe.close();
    }
  });
});
