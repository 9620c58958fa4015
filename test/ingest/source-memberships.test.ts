import { Code } from "@hookpost/contract";
import { MembershipStore, membershipObjectName } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { failure, NO_SOURCE_QUOTA, useHarness } from "./harness.js";

const SHARE = 4 * 1024;
// MEMBERSHIPS is shared by every source: without a share, one source's audiences would fill it
// and every source's syncs would be refused.
const h = useHarness({ config: { quota: { ...NO_SOURCE_QUOTA, maxMembershipBytes: SHARE } } });

const members = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(16, "0")}`);

describe("stored memberships per source (SOURCE_MAX_MEMBERSHIP_BYTES)", () => {
  it("refuses a sync that would take a source past its share, membership unchanged; other sources and smaller syncs go on", async () => {
    const store = await MembershipStore.open(h.nc);
    const a = await h.source("A");
    const b = await h.source("B");
    const sizeOf = async (sourceId: string, key: string) =>
      (await store.info(membershipObjectName(sourceId, "audience", key)))?.size ?? 0;

    expect(
      (await a.client.syncAudience([{ audienceName: "one", userIds: members("a1", 110) }])).members,
    ).toBe(110n);
    const one = await sizeOf(a.id, "one");
    expect(one).toBeGreaterThan(SHARE / 2);

    // A second audience as big does not fit beside the first.
    const err = await failure(a.client.syncAudience([{ audienceName: "two", userIds: members("a2", 100) }]));
    expect(err.code, err.message).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.message).toContain("SOURCE_MAX_MEMBERSHIP_BYTES");
    expect(err.retryAfterMs).toBeGreaterThan(0);
    expect(await sizeOf(a.id, "two"), "nothing stored for the refused sync").toBe(0);

    // Another source has its own share.
    expect(
      (await b.client.syncAudience([{ audienceName: "two", userIds: members("b2", 100) }])).members,
    ).toBe(100n);
    // The first audience may change within the share: it is not counted twice.
    expect(
      (await a.client.syncAudience([{ audienceName: "one", userIds: members("a1", 120) }])).members,
    ).toBe(120n);
    expect(await sizeOf(a.id, "one")).toBeGreaterThan(one);
    // And a small second one fits beside it.
    expect((await a.client.syncAudience([{ audienceName: "two", userIds: members("a2", 5) }])).members).toBe(
      5n,
    );
  });
});
