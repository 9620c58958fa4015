import { DEAD_STREAM, deadSubject } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

const LETTERS = 20_000;

// housekeeping.stop() (the first thing a dispatcher's close does after it stops pulling, before
// in-flight deliveries are drained) waits for a DeadLetterShares run under way, and a run deletes
// every letter it decided to drop one by one, with no way to stop it. A source far over its share
// (the very case the share is for: an endpoint refusing everything for hours) makes that one run
// tens of thousands of deletes long, so a SIGTERM (a deploy) waits minutes - past any
// orchestrator's grace period - while in-flight deliveries wait behind it.
describe("SOURCE_MAX_DEAD_LETTER_BYTES and a dispatcher stopping", () => {
  let s: Stack;

  beforeAll(async () => {
    s = await Stack.start({ dispatcher: { deadLetterSourceMaxBytes: 1024 } });
  });

  afterAll(async () => {
    await s?.close();
  });

  it("a dispatcher stops promptly while a trim of a source far over its share is under way", async () => {
    const a = await s.source("A");
    await s.destination({ id: "flooded", sourceIds: [a.id], urls: [s.receiver.url("/f")] });
    // Another source's letter, the oldest: what the trim protects (a lone source is not trimmed).
    const b = await s.source("B");
    await s.destination({ id: "calm", sourceIds: [b.id], urls: [s.receiver.url("/c")] });
    const js = s.nc.jetstream();
    await js.publish(deadSubject("calm"), '{"n":"b"}');
    // Dead letters as an endpoint refusing everything for a while leaves them (small ones, fast to write).
    for (let i = 0; i < LETTERS; i += 1000)
      await Promise.all(
        Array.from({ length: 1000 }, (_, j) => js.publish(deadSubject("flooded"), `{"n":${i + j}}`)),
      );
    const jsm = await s.nc.jetstreamManager();
    // DEAD's limit just above what it holds: the shares are kept from 3/4 on, so the trim has about
    // a quarter of the letters to drop (nothing is dropped by DEAD itself).
    const info = await jsm.streams.info(DEAD_STREAM);
    const maxBytes = Math.ceil(info.state.bytes * 1.01);
    await jsm.streams.update(DEAD_STREAM, { ...info.config, max_bytes: maxBytes });
    const trimmedTo = Math.floor((0.75 * maxBytes) / (info.state.bytes / (LETTERS + 1)));
    const count = async () => (await jsm.streams.info(DEAD_STREAM)).state.messages;
    // The periodic run (first after 5 s) starts dropping.
    await until(async () => (await count()) < LETTERS + 1 - 500, {
      timeout: 30_000,
      message: "the trim under way",
    });
    await s.dispatchers[0]!.close();
    // The trim stopped with the dispatcher, at its next chunk: it did not run to its end first
    // (to about 3/4 of DEAD: trimmedTo letters). The next replica's run goes on from there.
    const left = await count();
    expect(left, `${left} letters left when close returned`).toBeGreaterThan(trimmedTo + 1000);
  }, 120_000);
});
