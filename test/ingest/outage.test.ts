import { startIngest } from "@hookpost/api";
import { writeKeyMetadata } from "@hookpost/client";
import { Code, HookpostError } from "@hookpost/contract";
import { DEFAULT_TOPOLOGY, EVENTS_STREAM } from "@hookpost/core";
import { beforeAll, describe, expect, it } from "vitest";
import { GiveUp, until } from "../helpers/until.js";
import {
  adminClient,
  failure,
  type IngestClient,
  ingestClient,
  NO_SOURCE_QUOTA,
  silentLogger,
  testConfig,
  useHarness,
} from "./harness.js";

const SMALL = 64 * 1024;
// A small EVENTS stream, so that filling it takes a few dozen calls.
// The stream itself fills up here, not a source's quota.
const h = useHarness({ topology: { eventsMaxBytes: SMALL }, config: { quota: NO_SOURCE_QUOTA } });
let src: { id: string; writeKey: string; client: IngestClient };

beforeAll(async () => {
  src = await h.source("web");
});

const call = { userId: "u1", event: "Order Completed" };

/** Retries until the call succeeds (the service recovering on its own), for at most `ms`. */
async function untilAccepted(client: IngestClient, ms: number): Promise<string> {
  return until(
    async () => {
      try {
        return (await client.track(call, { timeoutMs: 2_000 })).messageId;
      } catch (err) {
        // Only "not available (yet)" is a failure to wait through.
        const retryable =
          err instanceof HookpostError && [Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED].includes(err.code);
        throw retryable ? err : new GiveUp(`not a retryable failure: ${String(err)}`);
      }
    },
    { timeout: ms, interval: 100, message: "a call accepted again" },
  );
}

describe("NATS outage", () => {
  it("answers UNAVAILABLE at once while NATS is down, and recovers on its own", async () => {
    const before = await src.client.track({ ...call, messageId: "before-outage" });
    await h.nats.kill();
    // The publish timeout is 5 s; a deadline of 4 s shows that the answer does not wait for it.
    const err = await failure(src.client.track(call, { timeoutMs: 4_000 }));
    expect(err.code, err.message).toBe(Code.UNAVAILABLE);
    expect(err.message).toMatch(/NATS|JetStream/);
    expect(err.message).toContain("retry");
    const batchErr = await failure(
      src.client.batch({ calls: [{ call: { case: "track", value: call } }] }, { timeoutMs: 4_000 }),
    );
    expect(batchErr.code).toBe(Code.UNAVAILABLE);
    // Configuration reads keep working from memory; changes fail fast.
    expect((await h.admin.getSource({ id: src.id }, { timeoutMs: 4_000 })).source!.id).toBe(src.id);
    const adminErr = await failure(h.admin.createSource({ name: "during outage" }, { timeoutMs: 4_000 }));
    expect(adminErr.code).toBe(Code.UNAVAILABLE);
    // The write key is still known: authentication does not need NATS.
    expect((await failure(h.client().track(call, { timeoutMs: 4_000 }))).code).toBe(Code.UNAUTHENTICATED);

    await h.restartNats();
    const after = await untilAccepted(src.client, 30_000);
    // Nothing acknowledged was lost: both calls are in the stream.
    expect(await h.find(before.messageId)).toBeDefined();
    expect(await h.find(after)).toBeDefined();

    // Changes work again, and reach another replica.
    const replica = await startIngest(
      testConfig(h.nats.url, { topology: { ...DEFAULT_TOPOLOGY, eventsMaxBytes: SMALL } }),
      { logger: silentLogger() },
    );
    try {
      const created = await h.admin.createSource({ name: "after outage" });
      const viaReplica = ingestClient(replica.address, writeKeyMetadata(created.writeKey));
      h.clients.push(viaReplica);
      // The replica learns the new source from the configuration bucket's watch, which may come
      // after the answer to the write: waited for, as the other way round below.
      await until(() => viaReplica.track(call).then((r) => r.messageId !== ""), {
        message: "a call accepted by the replica",
      });
      // And the other way round: the first instance (which lived through the outage) still
      // follows changes made elsewhere.
      const replicaAdmin = adminClient(replica.address);
      h.clients.push(replicaAdmin);
      const viaOther = await replicaAdmin.createSource({ name: "made on the replica" });
      const first = ingestClient(h.address, writeKeyMetadata(viaOther.writeKey));
      h.clients.push(first);
      await until(() => first.track(call).then(() => true), { message: "a call accepted" });
    } finally {
      await replica.close();
    }
  });
});

describe("full stream", () => {
  it("refuses new calls with RESOURCE_EXHAUSTED and keeps the older ones", async () => {
    await h.jsm.streams.purge(EVENTS_STREAM);
    const properties = { blob: "x".repeat(4 * 1024) };
    let full: HookpostError | undefined;
    for (let i = 0; i < 100 && !full; i++) {
      try {
        await src.client.track({ ...call, messageId: `fill-${i}`, properties });
      } catch (err) {
        full = err as HookpostError;
      }
    }
    expect(full, "the stream filled up").toBeDefined();
    expect(full!.code, full!.message).toBe(Code.RESOURCE_EXHAUSTED);
    expect(full!.message).toContain("stream is full");

    const info = await h.jsm.streams.info(EVENTS_STREAM);
    const first = await h.jsm.streams.getMessage(EVENTS_STREAM, { seq: info.state.first_seq });
    expect(first.json<{ messageId: string }>().messageId).toBe("fill-0");

    for (let i = 0; i < 5; i++) {
      const err = await failure(src.client.track({ ...call, messageId: `more-${i}`, properties }));
      expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    }
    const batch = await failure(
      src.client.batch({ calls: [{ call: { case: "track", value: { ...call, properties } } }] }),
    );
    expect(batch.code).toBe(Code.RESOURCE_EXHAUSTED);

    const after = await h.jsm.streams.info(EVENTS_STREAM);
    expect(after.state.messages).toBe(info.state.messages);
    expect(after.state.first_seq).toBe(info.state.first_seq);
    const firstAfter = await h.jsm.streams.getMessage(EVENTS_STREAM, { seq: after.state.first_seq });
    expect(firstAfter.string()).toBe(first.string());

    // Once the backlog drains (here: purged), calls are accepted again.
    await h.jsm.streams.purge(EVENTS_STREAM);
    expect((await src.client.track(call)).messageId).not.toBe("");
  });
});
