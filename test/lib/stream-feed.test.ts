import { StreamFeed } from "@hookpost/core";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";

// The feed the health fold reads the attempt log with: every message of the stream once, in
// order, from a start time, and still exactly once across a nats-server restart.

const nats = useNats({ maxReconnectAttempts: -1, reconnectTimeWait: 100 });

beforeAll(async () => {
  const jsm = await nats.nc.jetstreamManager();
  await jsm.streams.add({ name: "FEED", subjects: ["feed.a.>", "feed.b.>"] });
});

const decoder = new TextDecoder();

describe("StreamFeed", () => {
  it("delivers every message of every subject once, in order, and goes on after a server restart", async () => {
    const js = nats.nc.jetstream();
    // Before the feed starts, and older than its start time: left out.
    const old = await js.publish("feed.a.old", "old");
    const oldTime = (await (await nats.nc.jetstreamManager()).streams.getMessage("FEED", { seq: old.seq }))
      .time;
    await until(() => Date.now() > oldTime.getTime(), { message: "the clock past the old message" });
    const startedAt = new Date();
    for (let i = 0; i < 50; i++) await js.publish(i % 2 ? "feed.a.x" : "feed.b.y", String(i));

    const seen: Array<{ text: string; seq: number }> = [];
    const feed = new StreamFeed({
      nc: nats.nc,
      stream: "FEED",
      startTime: () => startedAt,
      onMessage: (data, seq) => seen.push({ text: decoder.decode(data), seq }),
      logger: quietLogger,
      heartbeatMs: 500,
    });
    feed.start();
    try {
      await until(() => seen.length >= 50, { timeout: 10_000, message: "the first 50 messages" });
      expect(seen.map((s) => s.text)).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
      expect(feed.lastSequence).toBe(51);

      // The server goes away and comes back (its ephemeral consumer is gone with it).
      await nats.server.restart();
      for (let i = 50; i < 100; i++) {
        await until(() => js.publish("feed.a.z", String(i)), {
          interval: 100,
          message: `message ${i} published after the restart`,
        });
      }
      await until(() => seen.length >= 100, { timeout: 20_000, message: "the messages after the restart" });
      expect(seen.map((s) => s.text)).toEqual(Array.from({ length: 100 }, (_, i) => String(i)));
      expect(seen.map((s) => s.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 2));
    } finally {
      feed.close();
    }
  });

  it("started while its server is down, follows the stream once the server is back", async () => {
    const logged: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void logged.push(line) });
    const seen: string[] = [];
    // Before the outage: a feed's first consumer starts from here, whenever it gets to start.
    const startedAt = new Date();
    await nats.server.kill();
    const feed = new StreamFeed({
      nc: nats.nc,
      stream: "FEED",
      startTime: () => startedAt,
      onMessage: (data) => seen.push(decoder.decode(data)),
      logger,
      heartbeatMs: 500,
    });
    feed.start();
    try {
      // It failed to start (an account check, then its consumer's creation, time out meanwhile)
      // and says it starts again; it used to stop there for good, its promise rejected unhandled.
      await until(() => logged.some((l) => l.includes("stream feed")), {
        timeout: 20_000,
        message: "the feed's failed start logged",
      });
      await nats.server.restart();
      const js = nats.nc.jetstream();
      await until(() => js.publish("feed.b.later", "later").then(() => true), {
        interval: 100,
        message: "a message published after the server is back",
      });
      await until(() => seen.includes("later"), { timeout: 20_000, message: "the message followed" });
    } finally {
      feed.close();
    }
  });
});
