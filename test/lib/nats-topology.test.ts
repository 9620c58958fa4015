import {
  ConfigStore,
  DEAD_STREAM,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  EVENTS_STREAM,
  ensureTopology,
} from "@hookpost/core";
import { DiscardPolicy } from "nats";
import { describe, expect, it } from "vitest";
import { useNats } from "../helpers/use-nats.js";

const nats = useNats();

describe("topology", () => {
  it("creates the streams idempotently and applies changed limits", async () => {
    const jsm = await nats.nc.jetstreamManager();
    await Promise.all([ensureTopology(jsm, DEFAULT_TOPOLOGY), ensureTopology(jsm, DEFAULT_TOPOLOGY)]);
    await ensureTopology(jsm, { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 1024 * 1024 });
    expect((await jsm.streams.info(EVENTS_STREAM)).config.max_bytes).toBe(1024 * 1024);
    expect((await jsm.streams.info(DELIVERIES_STREAM)).config.max_age).toBeGreaterThan(0);
  });

  it("gives an existing DEAD stream without a byte limit one, dropping the oldest when full", async () => {
    const jsm = await nats.nc.jetstreamManager();
    await jsm.streams.delete(DEAD_STREAM);
    // As created before byte limits: no max_bytes.
    await jsm.streams.add({ name: DEAD_STREAM, subjects: ["hookpost.dead.>"], discard: DiscardPolicy.Old });
    await ensureTopology(jsm, { ...DEFAULT_TOPOLOGY, deadLetterMaxBytes: 1024 * 1024 });
    const { config } = await jsm.streams.info(DEAD_STREAM);
    expect(config.max_bytes).toBe(1024 * 1024);
    expect(config.discard).toBe(DiscardPolicy.Old);
  });
});

describe("config store", () => {
  // How soon is a figure of `npm run bench` (a new destination delivering), not a timed assertion.
  it("sees a change made by another replica", async () => {
    const a = await ConfigStore.open(nats.nc);
    const b = await ConfigStore.open(nats.nc);
    const seen = new Promise<void>((resolve) =>
      b.on("change", (c) => {
        if (c.kind === "source" && c.id === "s1" && c.record) resolve();
      }),
    );
    await a.putSource({ id: "s1", name: "web", writeKeyHash: "h", writeKeyPrefix: "hpk_", createdAt: "x" });
    await seen;
    expect(b.source("s1")?.name).toBe("web");
    a.close();
    b.close();
  });
});
