import type { DestinationRecord, SourceRecord } from "@hookpost/core";
import { CONFIG_BUCKET, ConfigStore } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { destination } from "../dispatcher/helpers.js";
import { useNats } from "../helpers/use-nats.js";

// Read-modify-write of configuration is compare-and-set on the KV revision: a write made by
// someone else between the read and the write is never overwritten (real nats-server).

const nats = useNats();
let mine: ConfigStore;

beforeAll(async () => {
  mine = await ConfigStore.open(nats.nc);
});

afterAll(async () => {
  mine?.close();
});

describe("ConfigStore.changeDestination", () => {
  it("a write that got in between the read and the write is kept: the change runs again on the newer record", async () => {
    await mine.putDestination(destination({ id: "cas-1", urls: ["https://a.example.com"] }));
    const kv = await nats.nc.jetstream().views.kv(CONFIG_BUCKET);
    let calls = 0;
    const revision = await mine.changeDestination("cas-1", (current) => {
      calls++;
      // Another replica writes after our read: its publish leaves on this connection before our
      // compare-and-set does, so the server sees it first.
      if (calls === 1)
        void kv.put("destination.cas-1", JSON.stringify({ ...current, name: "renamed elsewhere" }));
      return { ...current, headers: { "X-Team": "growth" } };
    });
    expect(revision).toBeGreaterThan(0);
    // Refused once (10071), computed again on the newer record.
    expect(calls).toBe(2);
    // Neither write is lost: the bucket holds both.
    const stored = (await kv.get("destination.cas-1"))!.json() as DestinationRecord;
    expect(stored.name).toBe("renamed elsewhere");
    expect(stored.headers).toEqual({ "X-Team": "growth" });
    expect(mine.destination("cas-1")).toEqual(stored);
  });

  it("the same for a source (a write-key rotation racing another change)", async () => {
    await mine.createSource({
      id: "src-cas",
      name: "Web",
      writeKeyHash: "h0",
      writeKeyPrefix: "p0",
      createdAt: new Date().toISOString(),
    });
    const kv = await nats.nc.jetstream().views.kv(CONFIG_BUCKET);
    let calls = 0;
    await mine.changeSource("src-cas", (current) => {
      calls++;
      if (calls === 1) void kv.put("source.src-cas", JSON.stringify({ ...current, name: "Web app" }));
      return { ...current, writeKeyHash: "h1" };
    });
    expect(calls).toBe(2);
    const stored = (await kv.get("source.src-cas"))!.json() as SourceRecord;
    expect(stored).toMatchObject({ name: "Web app", writeKeyHash: "h1" });
  });

  it("a change that throws writes nothing and the error reaches the caller", async () => {
    await mine.putDestination(destination({ id: "cas-3", urls: ["https://a.example.com"] }));
    const before = mine.destination("cas-3");
    await expect(
      mine.changeDestination("cas-3", () => {
        throw new Error("refused");
      }),
    ).rejects.toThrow("refused");
    expect(mine.destination("cas-3")).toEqual(before);
  });

  it("a missing record: nothing written, undefined", async () => {
    expect(await mine.changeDestination("no-such", (c) => c)).toBeUndefined();
    expect(await mine.changeSource("no-such", (c) => c)).toBeUndefined();
  });
});
