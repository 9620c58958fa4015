import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

// A source can be over its share without any sync having been let past it: memberships stored
// before SOURCE_MAX_MEMBERSHIP_BYTES existed (an upgrade), a share the operator lowered, or syncs
// on two replicas at once. Nothing else frees room: there is no call that deletes a membership,
// so a sync that shrinks a list is the only way back under it.
describe("SOURCE_MAX_MEMBERSHIP_BYTES and a source already over its share", () => {
  it("lets a sync that shrinks a stored membership go on (it only frees room)", async () => {
    const store = await MembershipStore.open(h.nc);
    const a = await h.source("A");
    // Stored before the share applied (written straight to the store, as an older version did).
    for (const key of ["one", "two", "three"]) {
      const path = join(tmpdir(), `membership-share-${a.id}-${key}.txt`);
      await writeFile(path, `${members(key, 110).sort().join("\n")}\n`);
      await store.write(membershipObjectName(a.id, "audience", key), path, undefined);
    }
    const sizeOf = async (key: string) =>
      (await store.info(membershipObjectName(a.id, "audience", key)))?.size ?? 0;
    expect((await sizeOf("one")) + (await sizeOf("two")) + (await sizeOf("three"))).toBeGreaterThan(SHARE);

    // Remove every member but 5 from "three": the source's bytes only go down.
    const res = await a.client
      .syncAudience([{ audienceName: "three", userIds: members("three", 5) }])
      .catch((err: Error) => err);
    expect(res instanceof Error ? res.message : "ok").toBe("ok");
    expect(await sizeOf("three")).toBeLessThan(1024);
  });
});

// Measured against the other memberships as read when the sync started, every concurrent sync of
// another audience would pass on that same figure: k syncs at once would overshoot by k - 1
// lists, and a source syncing its audiences in parallel (what a CDP does) would end up at a
// multiple of its share.
describe("SOURCE_MAX_MEMBERSHIP_BYTES and concurrent syncs of one source", () => {
  it("syncs of several audiences at once do not take the source past its share by more than one list", async () => {
    const store = await MembershipStore.open(h.nc);
    const a = await h.source("A");
    const keys = ["k1", "k2", "k3", "k4", "k5", "k6"];
    // Each list is about 0.6 of the share: one fits, two do not.
    await Promise.allSettled(
      keys.map((key) => a.client.syncAudience([{ audienceName: key, userIds: members(key, 110) }])),
    );
    let total = 0;
    let largest = 0;
    for (const key of keys) {
      const size = (await store.info(membershipObjectName(a.id, "audience", key)))?.size ?? 0;
      total += size;
      largest = Math.max(largest, size);
    }
    expect(total).toBeLessThanOrEqual(SHARE + largest);
  });
});
