import * as errors from "@hookpost/core";
import { DiscardPolicy } from "nats";
import { describe, expect, it } from "vitest";
import { useNats } from "../helpers/use-nats.js";

const { isAlreadyExists, isNoResponders, isNotFound, isStreamFull, isTransient, isWrongLastSequence } =
  errors;
const { JetStreamErrorCode, jetStreamErrorCode } = errors;

// The classification of NATS failures, on errors a real nats-server produces: what a retry with
// the same message id may cure (an election, a slow answer) and what it cannot (a full stream).

const nats = useNats();

const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected a failure");
    },
    (err: unknown) => err,
  );

describe("jetstream-errors", () => {
  it("no responders (nothing behind the subject, e.g. no stream leader yet) is transient", async () => {
    const err = await failure(nats.nc.request("nobody.listens", "x", { timeout: 2000 }));
    expect(isNoResponders(err)).toBe(true);
    expect(isTransient(err)).toBe(true);
  });

  it("a request answered too late is transient, and not 'no responders'", async () => {
    const sub = nats.nc.subscribe("silent.listener");
    const err = await failure(nats.nc.request("silent.listener", "x", { timeout: 100 }));
    sub.unsubscribe();
    expect(isNoResponders(err)).toBe(false);
    expect(isTransient(err)).toBe(true);
  });

  it("a full stream is not transient; neither is a stream that does not exist", async () => {
    const jsm = await nats.nc.jetstreamManager();
    await jsm.streams.add({ name: "TINY", subjects: ["tiny.>"], max_msgs: 1, discard: DiscardPolicy.New });
    const js = nats.nc.jetstream();
    await js.publish("tiny.a", "1");
    const full = await failure(js.publish("tiny.a", "2"));
    expect(isStreamFull(full)).toBe(true);
    expect(isTransient(full)).toBe(false);
    const missing = await failure(jsm.streams.info("NO_SUCH_STREAM"));
    expect(isTransient(missing)).toBe(false);
    expect(isNoResponders(missing)).toBe(false);
  });

  it("a revision-checked KV write on a key that changed (or exists) is 'wrong last sequence', by its code", async () => {
    const kv = await nats.nc.jetstream().views.kv("CAS_TEST", { history: 1 });
    const first = await kv.put("k", "1");
    await kv.put("k", "2");
    const stale = await failure(kv.update("k", "3", first));
    expect(isWrongLastSequence(stale)).toBe(true);
    expect(isTransient(stale)).toBe(false);
    const taken = await failure(kv.create("k", "4"));
    expect(isWrongLastSequence(taken)).toBe(true);
    // Other refusals are not it.
    const jsm = await nats.nc.jetstreamManager();
    expect(isWrongLastSequence(await failure(jsm.streams.info("NO_SUCH_STREAM")))).toBe(false);
  });

  it("a missing stream, consumer or message is 'not found', by its code", async () => {
    const jsm = await nats.nc.jetstreamManager();
    const noStream = await failure(jsm.streams.info("NO_SUCH_STREAM"));
    expect(jetStreamErrorCode(noStream)).toBe(JetStreamErrorCode.StreamNotFound);
    expect(isNotFound(noStream)).toBe(true);
    await jsm.streams.add({ name: "LOOKUP", subjects: ["lookup.>"] });
    const noConsumer = await failure(jsm.consumers.info("LOOKUP", "nobody"));
    expect(jetStreamErrorCode(noConsumer)).toBe(JetStreamErrorCode.ConsumerNotFound);
    expect(isNotFound(noConsumer)).toBe(true);
    const noMessage = await failure(jsm.streams.getMessage("LOOKUP", { last_by_subj: "lookup.none" }));
    expect(jetStreamErrorCode(noMessage)).toBe(JetStreamErrorCode.NoMessageFound);
    expect(isNotFound(noMessage)).toBe(true);
    expect(isAlreadyExists(noMessage)).toBe(false);
  });

  it("creating a stream that exists with another configuration is 'already exists'", async () => {
    const jsm = await nats.nc.jetstreamManager();
    await jsm.streams.add({ name: "TWICE", subjects: ["twice.>"] });
    const stream = await failure(jsm.streams.add({ name: "TWICE", subjects: ["twice.>"], max_msgs: 5 }));
    expect(isAlreadyExists(stream)).toBe(true);
    expect(jetStreamErrorCode(stream)).toBe(JetStreamErrorCode.StreamNameInUse);
    expect(isNotFound(stream)).toBe(false);
  });
});
