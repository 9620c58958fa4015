import { UserSourceIndex } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { useNats } from "../helpers/use-nats.js";

const nats = useNats();

// SourceUserCounts starts every source's counter at 0 when its key is absent: the users a source
// already has in the index (every deployment upgraded to this version, SOURCE_MAX_USERS on by
// default at a quarter of the index) are never counted. A source holding most of the index keeps
// adding SOURCE_MAX_USERS more new users, so the index fills and every source's new users are
// refused: what the quota was for.
describe("SOURCE_MAX_USERS after an upgrade", () => {
  it("counts the users a source already had in the index before the quota", async () => {
    const before = await UserSourceIndex.open(nats.nc); // an older version: no counting
    for (let i = 0; i < 8; i++) await before.remember(`old-${i}`, "big");
    before.close();

    const after = await UserSourceIndex.open(nats.nc, { maxUsersPerSource: 5 });
    try {
      expect(await after.usersOf("big")).toBe(8);
      await expect(after.remember("brand-new", "big")).rejects.toThrow(/SOURCE_MAX_USERS/);
      // Its known users still go on.
      await after.remember("old-3", "big");
    } finally {
      after.close();
    }
  });
});

// UserSourceIndex.#admit reserves a place for every pair it is about to write, known or not: a
// replica with nothing in memory (a restart; a sync's record() never caches) re-confirms known
// users through the same write, which holds a place until the server says "already stored".
// A new user arriving meanwhile at quota - 1 sees those places as taken and is refused (FULL,
// Retry-After 60 s) although, once the known user's write comes back, there was room for it.
describe("SOURCE_MAX_USERS and places held by known users' re-confirmations", () => {
  it("a new user is not refused for a place a known user's write holds", async () => {
    const MAX = 5;
    const first = await UserSourceIndex.open(nats.nc, { maxUsersPerSource: MAX });
    for (let i = 0; i < MAX - 1; i++) await first.remember(`known-${i}`, "src");
    await first.flushCounts();
    await first.close();

    // Another replica (or this one after a restart): nothing in memory. Two calls at once, one
    // of a known user and one of a new user: 4 stored + 1 new = the quota, room for it.
    const fresh = await UserSourceIndex.open(nats.nc, { maxUsersPerSource: MAX });
    try {
      const [known, fresh1] = await Promise.allSettled([
        fresh.remember("known-0", "src"),
        fresh.remember("new-user", "src"),
      ]);
      expect(known.status).toBe("fulfilled");
      expect(fresh1.status === "rejected" ? String(fresh1.reason) : "accepted").toBe("accepted");
      // And the quota holds after it.
      await expect(fresh.remember("one-too-many", "src")).rejects.toThrow(/SOURCE_MAX_USERS/);
    } finally {
      await fresh.close();
    }
  });
});
