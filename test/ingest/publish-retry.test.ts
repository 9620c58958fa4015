import { DEFAULT_TOPOLOGY, EVENTS_STREAM, ensureTopology } from "@hookpost/core";
import { beforeAll, describe, expect, it } from "vitest";
import { type IngestClient, useHarness } from "./harness.js";

// A publish that JetStream does not confirm in time (here: the EVENTS stream is gone while a
// listener swallows the first attempt, as a stream leader lost in an election would) is sent
// again with the same message id until the publish deadline: the call succeeds once the stream
// is back, and is stored exactly once.

const h = useHarness({ config: { publishTimeoutMs: 15_000 } });
let src: { id: string; writeKey: string; client: IngestClient };

beforeAll(async () => {
  src = await h.source("web");
});

describe("publish retries", () => {
  it("retries an unconfirmed publish within the deadline and stores the call once", async () => {
    await h.jsm.streams.delete(EVENTS_STREAM);
    // Swallows the first attempt (no answer: the attempt times out rather than failing at once).
    const swallowed = new Promise<void>((resolve) => {
      const sub = h.nc.subscribe("hookpost.events.>", {
        callback: () => {
          sub.unsubscribe();
          resolve();
        },
      });
    });
    await h.nc.flush();
    const pending = src.client.track(
      { userId: "u1", event: "Retried", messageId: "retry-1" },
      { timeoutMs: 20_000 },
    );
    await swallowed;
    await ensureTopology(h.jsm, DEFAULT_TOPOLOGY);
    expect((await pending).messageId).toBe("retry-1");
    const stored = (await h.stored()).filter((s) => s.call.messageId === "retry-1");
    expect(stored).toHaveLength(1);
  });
});
