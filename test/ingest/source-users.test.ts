import { startIngest } from "@hookpost/api";
import { adminMetadata, writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { DEFAULT_TOPOLOGY, USER_SOURCES_BUCKET, UserSourceIndex } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { post } from "../http/helpers.js";
import {
  ADMIN_TOKEN,
  failure,
  ingestClient,
  NO_SOURCE_QUOTA,
  silentLogger,
  testConfig,
  useHarness,
} from "./harness.js";

const MAX_USERS = 20;
// The user index is shared by every source: one source sending ever new user ids would fill it,
// and from then on every source's calls of new users would be refused.
const quota = { ...NO_SOURCE_QUOTA, maxUsers: MAX_USERS };
const h = useHarness({ config: { httpAddress: "127.0.0.1:0", quota } });

const track = (writeKey: string, userId: string, messageId?: string) =>
  post(h.httpBase, "/v1/track", { userId, event: "E", messageId }, { writeKey });

/** The source's users counter as stored in the index bucket (what other replicas read). */
async function storedCount(sourceId: string): Promise<number> {
  const kv = await h.nc.jetstream().views.kv(USER_SOURCES_BUCKET);
  return Number((await kv.get(`n.${sourceId}`))?.string() ?? 0);
}

describe("users per source (SOURCE_MAX_USERS)", () => {
  it("at its quota a source's new users get 429 + Retry-After and RESOURCE_EXHAUSTED; its known users and other sources are accepted, on every replica; a deletion frees room", async () => {
    const a = await h.source("A");
    const b = await h.source("B");
    let accepted = 0;
    let refused: Awaited<ReturnType<typeof track>> | undefined;
    for (let i = 0; i < 2 * MAX_USERS && !refused; i++) {
      const r = await track(a.writeKey, `a-${i}`, `a-call-${i}`);
      if (r.status === 200) accepted++;
      else refused = r;
    }
    // One replica, one call at a time: exactly the quota.
    expect(accepted).toBe(MAX_USERS);
    expect(refused?.status).toBe(429);
    expect(refused?.body.code).toBe("RESOURCE_EXHAUSTED");
    expect(refused?.body.message).toContain("SOURCE_MAX_USERS");
    expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await h.find(`a-call-${MAX_USERS}`), "the refused call is not stored").toBeUndefined();
    const grpc = await failure(a.client.track({ userId: "a-new", event: "E" }));
    expect(grpc.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(grpc.retryAfterMs).toBeGreaterThan(0);

    // Known users go on: over HTTP and gRPC.
    expect((await track(a.writeKey, "a-0")).status).toBe(200);
    expect((await a.client.track({ userId: "a-1", event: "E" })).messageId).not.toBe("");
    // Another source's new users are accepted.
    for (let i = 0; i < 10; i++) expect((await track(b.writeKey, `b-${i}`)).status).toBe(200);
    const metric = await h.ingest.metrics.registry.getSingleMetricAsString(
      "hookpost_ingest_quota_refused_total",
    );
    expect(metric).toMatch(/limit="users"\} [1-9]/);

    // Another replica, with nothing in memory, reads A's count from the bucket once written.
    await until(async () => (await storedCount(a.id)) === MAX_USERS, { message: "A's count written" });
    const replica = await startIngest(testConfig(h.nats.url, { topology: DEFAULT_TOPOLOGY, quota }), {
      logger: silentLogger(),
    });
    try {
      const viaReplica = ingestClient(replica.address, writeKeyMetadata(a.writeKey));
      h.clients.push(viaReplica);
      // A user it never saw, but A did: still accepted there.
      expect((await viaReplica.track({ userId: "a-7", event: "E" })).messageId).not.toBe("");
      expect((await failure(viaReplica.track({ userId: "a-new", event: "E" }))).code).toBe(
        Code.RESOURCE_EXHAUSTED,
      );
    } finally {
      await replica.close();
    }

    // A deletion of one of A's users frees one place.
    const asAdmin = h.client(adminMetadata(ADMIN_TOKEN));
    expect((await asAdmin.delete({ userId: "a-3" })).sourceIds).toEqual([a.id]);
    expect((await track(a.writeKey, "a-fresh")).status).toBe(200);
    expect((await track(a.writeKey, "a-fresh-2")).status).toBe(429);
  });

  it("replicas add to one shared count, a forgotten user takes one off, and a deleted source's count goes with it", async () => {
    const [one, two] = await Promise.all([
      UserSourceIndex.open(h.nc, { maxUsersPerSource: 1_000 }),
      UserSourceIndex.open(h.nc, { maxUsersPerSource: 1_000 }),
    ]);
    try {
      await Promise.all(
        Array.from({ length: 30 }, (_, i) => (i % 2 ? one : two).remember(`shared-${i}`, "shared")),
      );
      await Promise.all([one.flushCounts(), two.flushCounts()]);
      expect(await storedCount("shared")).toBe(30);
      await one.forget("shared-0", ["shared"]);
      await one.flushCounts();
      expect(await storedCount("shared")).toBe(29);
      await two.forgetSource("shared");
      expect(await storedCount("shared")).toBe(0);
    } finally {
      one.close();
      two.close();
    }
  });

  it("a batch's or a sync's new users, recorded at once, stop at the quota", async () => {
    const c = await h.source("C");
    const batch = Array.from({ length: 2 * MAX_USERS }, (_, i) => ({
      type: "track",
      userId: `c-${i}`,
      event: "E",
    }));
    expect((await post(h.httpBase, "/v1/batch", { batch }, { writeKey: c.writeKey })).status).toBe(429);
    await until(async () => (await storedCount(c.id)) === MAX_USERS, { message: "C's count at the quota" });

    const d = await h.source("D");
    const members = Array.from({ length: 2 * MAX_USERS }, (_, i) => `d-${i}`);
    const err = await failure(d.client.syncAudience([{ audienceName: "all", userIds: members }]));
    expect(err.code, err.message).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.message).toContain("SOURCE_MAX_USERS");
    await until(async () => (await storedCount(d.id)) === MAX_USERS, { message: "D's count at the quota" });
  });
});
