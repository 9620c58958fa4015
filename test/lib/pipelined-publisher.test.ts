import { isStreamFull, PipelinedPublisher, PublishError } from "@hookpost/core";
import { DiscardPolicy, headers, RetentionPolicy } from "nats";
import { beforeAll, describe, expect, it } from "vitest";
import { useNats } from "../helpers/use-nats.js";

const nats = useNats();

beforeAll(async () => {
  const jsm = await nats.nc.jetstreamManager();
  await jsm.streams.add({ name: "PP", subjects: ["pp.>"], retention: RetentionPolicy.Limits });
  await jsm.streams.add({ name: "TINY", subjects: ["tiny.>"], max_msgs: 1, discard: DiscardPolicy.New });
});

const withId = (id: string) => {
  const h = headers();
  h.set("Nats-Msg-Id", id);
  return h;
};

describe("PipelinedPublisher", () => {
  it("stores many messages in flight at once, each confirmed by its own PubAck, and deduplicates ids", async () => {
    const pipe = new PipelinedPublisher(nats.nc, 10_000);
    const acks = await Promise.all(
      Array.from({ length: 2_000 }, (_, i) => pipe.publish(`pp.${i % 7}`, `m${i}`, withId(`id-${i}`))),
    );
    expect(new Set(acks.map((a) => a.seq)).size).toBe(2_000);
    expect(acks.every((a) => a.stream === "PP" && !a.duplicate)).toBe(true);
    expect(pipe.inFlight).toBe(0);
    const again = await pipe.publish("pp.0", "m0", withId("id-0"));
    expect(again.duplicate).toBe(true);
    const info = await (await nats.nc.jetstreamManager()).streams.info("PP");
    expect(info.state.messages).toBe(2_000);
    pipe.close();
  });

  it("rejects with the JetStream API error, shaped so the classifiers see a full stream", async () => {
    const pipe = new PipelinedPublisher(nats.nc, 10_000);
    await pipe.publish("tiny.a", "first", headers());
    const err = await pipe.publish("tiny.a", "second", headers()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PublishError);
    expect(isStreamFull(err)).toBe(true);
    pipe.close();
  });

  it("answers no responders (503) when no stream takes the subject", async () => {
    const pipe = new PipelinedPublisher(nats.nc, 10_000);
    const err = (await pipe.publish("nobody.here", "x", headers()).catch((e: unknown) => e)) as PublishError;
    expect(err.code).toBe("503");
    pipe.close();
  });

  it("times out when nobody answers, and fails what is in flight on failAll and close", async () => {
    const silent = nats.nc.subscribe("silent.>"); // a responder that never answers: no 503, no PubAck
    const pipe = new PipelinedPublisher(nats.nc, 300);
    const timedOut = (await pipe
      .publish("silent.a", "x", headers())
      .catch((e: unknown) => e)) as PublishError;
    expect(timedOut.code).toBe("TIMEOUT");

    const slow = new PipelinedPublisher(nats.nc, 60_000);
    const pending = slow.publish("silent.b", "x", headers()).catch((e: unknown) => e);
    slow.failAll(new PublishError("DISCONNECT", "lost"));
    expect(((await pending) as PublishError).code).toBe("DISCONNECT");
    const afterClose = slow.publish("silent.c", "x", headers()).catch((e: unknown) => e);
    slow.close();
    expect(((await afterClose) as PublishError).code).toBe("CONNECTION_CLOSED");
    expect(slow.closed).toBe(true);
    silent.unsubscribe();
    pipe.close();
  });

  it("keeps answering in order of arrival while an old message waits for its deadline", async () => {
    const silent = nats.nc.subscribe("stalled.>");
    const pipe = new PipelinedPublisher(nats.nc, 1_500);
    // The oldest pending message never gets an answer: the ones behind it (more than the
    // initial ring holds, in several rounds so the ring wraps) must settle all the same.
    const stalled = pipe.publish("stalled.a", "x", headers()).catch((e: unknown) => e);
    for (let round = 0; round < 3; round++) {
      const acks = await Promise.all(
        Array.from({ length: 1_500 }, (_, i) => pipe.publish(`pp.r${round}`, `r${round}-${i}`, headers())),
      );
      expect(acks.every((a) => a.stream === "PP" && a.seq > 0)).toBe(true);
      expect(pipe.inFlight).toBe(1);
    }
    expect(((await stalled) as PublishError).code).toBe("TIMEOUT");
    expect(pipe.inFlight).toBe(0);
    silent.unsubscribe();
    pipe.close();
  });
});
