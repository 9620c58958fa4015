import { type IngestHandle, startIngest } from "@hookpost/api";
import { adminMetadata, createClient } from "@hookpost/client";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsCluster } from "../helpers/nats-cluster.js";
import { eventsOf, expectOnlyARefusedUntilDrained, sendUntilRefused } from "../helpers/source-quota.js";
import { until } from "../helpers/until.js";
import { post } from "../http/helpers.js";
import { ADMIN_TOKEN, silentLogger, testConfig } from "../ingest/harness.js";

const KIB = 1024;
let cluster: NatsCluster;
let jsm: JetStreamManager;
const ingests: IngestHandle[] = [];

beforeAll(async () => {
  cluster = await NatsCluster.start(3);
  jsm = await (await cluster.connect()).jetstreamManager();
  // Two ingest replicas, each connected to a different member, R3 streams.
  for (const node of cluster.nodes.slice(0, 2)) {
    ingests.push(
      await startIngest(
        testConfig(node.server.url, {
          httpAddress: "127.0.0.1:0",
          topology: { ...DEFAULT_TOPOLOGY, replicas: 3, eventsMaxBytes: 1024 * KIB },
          quota: { maxPendingBytes: 64 * KIB, maxRate: 10_000, burst: 20_000, refreshMs: 200 },
        }),
        { logger: silentLogger() },
      ),
    );
  }
});

afterAll(async () => {
  for (const i of ingests) await i.close();
  await cluster?.stop();
});

describe("per-source quota on a 3-node cluster", () => {
  it("two replicas on different members stop A near one quota, keep accepting B, and accept A again once drained", async () => {
    const admin = createClient(AdminService, ingests[0]!.address, { metadata: adminMetadata(ADMIN_TOKEN) });
    try {
      const created = [await admin.createSource({ name: "A" }), await admin.createSource({ name: "B" })];
      const [a, b] = created.map((r) => ({ id: r.source!.id, writeKey: r.writeKey }));
      const urls = ingests.map((i) => `http://${i.httpAddress}`);
      // The source reaches the second replica through the configuration bucket.
      await expectAccepted(urls, b!.writeKey);
      const { refused } = await sendUntilRefused(urls, a!.writeKey, { paceEvery: 4 });
      expect(refused?.status).toBe(429);
      expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThan(0);
      expect((await eventsOf(jsm, a!.id)) * 4 * KIB).toBeLessThan(96 * KIB);
      await expectOnlyARefusedUntilDrained(jsm, urls, a!, b!);
    } finally {
      admin.close();
    }
  });
});

/** Waits until every replica knows the write key (a change reaches the others within ~1 s). */
async function expectAccepted(urls: string[], writeKey: string): Promise<void> {
  for (const url of urls) {
    await until(
      async () => (await post(url, "/v1/track", { userId: "u", event: "E" }, { writeKey })).status === 200,
      { message: `write key known at ${url}` },
    );
  }
}
