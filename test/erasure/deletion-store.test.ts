import { DELETIONS_BUCKET, type DeletionRecord, DeletionStore, kvStream, NO_ERASURES } from "@hookpost/core";
import { beforeAll, describe, expect, it } from "vitest";
import { useNats } from "../helpers/use-nats.js";

/*
 * DeletionStore.pending is asked every ERASURE_INTERVAL on every API replica, nearly always when
 * nothing is pending: it then lists no keys (each listing creates a consumer on the bucket's
 * stream, counted here from the JetStream API requests), and still sees a request another replica
 * stored.
 */

const nats = useNats();
let listings = 0;

beforeAll(async () => {
  const api = `$JS.API.CONSUMER.CREATE.${kvStream(DELETIONS_BUCKET)}`;
  for (const subject of [api, `${api}.>`]) nats.nc.subscribe(subject, { callback: () => listings++ });
  await nats.nc.flush();
});

/** `pending()`, and how many key listings it made (the request's copy is in before the flush's answer). */
async function pendingAndListings(store: DeletionStore): Promise<{ ids: string[]; listed: number }> {
  const before = listings;
  const ids = (await store.pending()).map((r) => r.requestId);
  await nats.nc.flush();
  return { ids, listed: listings - before };
}

const request = (requestId: string): DeletionRecord => ({
  requestId,
  userHash: "0".repeat(32),
  requestTime: new Date().toISOString(),
  notifiedSources: [],
  erased: NO_ERASURES,
  passes: 0,
});

describe("DeletionStore.pending", () => {
  it("lists the keys only when a request may have become pending since the last look", async () => {
    const store = await DeletionStore.open(nats.nc, { maxAgeMs: 86_400_000 });
    // A fresh replica looks once, then answers from the bucket's state while nothing changes.
    expect(await pendingAndListings(store)).toEqual({ ids: [], listed: 1 });
    expect(await pendingAndListings(store)).toEqual({ ids: [], listed: 0 });
    expect(await pendingAndListings(store)).toEqual({ ids: [], listed: 0 });

    // Another replica stores a request: seen at the next look.
    const other = await DeletionStore.open(nats.nc, { maxAgeMs: 86_400_000 });
    await other.create(request("del_a"));
    expect(await pendingAndListings(store)).toEqual({ ids: ["del_a"], listed: 1 });
    // Pending: looked at every time (the passes update it anyway).
    expect(await pendingAndListings(store)).toEqual({ ids: ["del_a"], listed: 1 });

    // Done: one more listing finds nothing, then quiet again.
    await other.update("del_a", (r) => ({ ...r, doneTime: new Date().toISOString() }));
    expect(await pendingAndListings(store)).toEqual({ ids: [], listed: 1 });
    expect(await pendingAndListings(store)).toEqual({ ids: [], listed: 0 });

    // A replica started now (or after a restart) has no state: it looks once.
    const restarted = await DeletionStore.open(nats.nc, { maxAgeMs: 86_400_000 });
    expect(await pendingAndListings(restarted)).toEqual({ ids: [], listed: 1 });
    await restarted.create(request("del_b"));
    expect(await pendingAndListings(store)).toEqual({ ids: ["del_b"], listed: 1 });
  });
});
