import { startIngest } from "@hookpost/api";
import { writeKeyMetadata } from "@hookpost/client";
import { DEFAULT_TOPOLOGY, USER_SOURCES_BUCKET } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { ingestClient, NO_SOURCE_QUOTA, silentLogger, testConfig, useHarness } from "../ingest/harness.js";

const quota = { ...NO_SOURCE_QUOTA, maxUsers: 1_000 };
const h = useHarness({ config: { quota } });

// UserSourceIndex.close() writes what was counted in the last second ("written if NATS is still
// there"), but the api never calls it: stores.close() closes the config store and the stream
// watch only. Every graceful stop (each rolling deploy, each replica) loses that second of new
// users from the shared count, so a source's count drifts under what the index holds.
describe("SOURCE_MAX_USERS counts at a graceful stop", () => {
  it("a replica stopped right after recording new users has written them to the shared count", async () => {
    const a = await h.source("A");
    const replica = await startIngest(testConfig(h.nats.url, { topology: DEFAULT_TOPOLOGY, quota }), {
      logger: silentLogger(),
    });
    const client = ingestClient(replica.address, writeKeyMetadata(a.writeKey));
    h.clients.push(client);
    for (let i = 0; i < 5; i++) await client.track({ userId: `stop-${i}`, event: "E" });
    await replica.close();

    const kv = await h.nc.jetstream().views.kv(USER_SOURCES_BUCKET);
    // close() resolved: the counts are written (no wait).
    expect(Number((await kv.get(`n.${a.id}`))?.string() ?? 0)).toBe(5);
  });
});
