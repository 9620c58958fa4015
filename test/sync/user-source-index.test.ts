import type { DeleteDeps } from "@hookpost/api";
import { deleteUser } from "@hookpost/api";
import { Code, HookpostError } from "@hookpost/contract";
import type { ConfigStore } from "@hookpost/core";
import {
  DeletionStore,
  eventSubject,
  USER_SOURCES_STREAM,
  UserSourceIndex,
  userSourceKey,
} from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { type Env, log, openConfig, purgeEvents, readEvents, startEnv } from "./helpers.js";

let env: Env;
let config: ConfigStore;
let deletions: DeletionStore;

const kvMessages = async () => (await env.jsm.streams.info(USER_SOURCES_STREAM)).state.messages;
const source = (id: string) => ({
  id,
  name: id,
  writeKeyHash: `hash-${id}`,
  writeKeyPrefix: "hpk_",
  createdAt: new Date().toISOString(),
});

beforeAll(async () => {
  env = await startEnv();
  config = await openConfig(env.nc);
  deletions = await DeletionStore.open(env.nc, { maxAgeMs: 86_400_000 });
  for (const id of ["web", "ios", "android", "server"]) await config.putSource(source(id));
});

afterAll(async () => {
  config?.close();
  await env?.close();
});

describe("user-source index", () => {
  it("writes a pair once, answers known pairs from memory, and persists across instances", async () => {
    const idx = env.index;
    await Promise.all([
      idx.remember("alice", "web"),
      idx.remember("alice", "web"),
      idx.remember("alice", "ios"),
    ]);
    const after = await kvMessages();
    const before = idx.stats;
    for (let i = 0; i < 1000; i++) await idx.remember("alice", "web");
    expect(await kvMessages()).toBe(after); // no write for a known pair
    expect(idx.stats.hits - before.hits).toBe(1000);
    expect(idx.stats.misses).toBe(before.misses);

    // A fresh instance (another replica, or after a restart) reads what the first stored...
    const fresh = await UserSourceIndex.open(env.nc);
    expect(await fresh.sourcesOf("alice")).toEqual(["ios", "web"]);
    // ...and confirming a stored pair writes nothing.
    await fresh.remember("alice", "web");
    expect(fresh.stats.misses).toBe(1);
    expect(fresh.stats.writes).toBe(0);
    expect(await kvMessages()).toBe(after);
    fresh.close();
  });

  it("encodes any user id into valid keys (unicode, dots, very long)", async () => {
    const ids = ["user.with.dots", "ünïcödé 🙂", "a/b=c*>", "x".repeat(10_000)];
    for (const id of ids) await env.index.remember(id, "server");
    for (const id of ids) expect(await env.index.sourcesOf(id)).toEqual(["server"]);
    expect(userSourceKey("x".repeat(10_000), "web").length).toBeLessThan(100);
    expect(await env.index.sourcesOf("never-seen")).toEqual([]);
    // Anonymous calls (no user id) are not recorded.
    await env.index.remember("", "web");
  });

  it("looks up candidate sources directly, and forgets every pair of a deleted source", async () => {
    await env.index.remember("erin", "web");
    await env.index.remember("erin", "gone");
    await env.index.remember("frank", "gone");
    expect(await env.index.sourcesOf("erin", ["ios", "web", "android", "web"])).toEqual(["web"]);
    expect(await env.index.sourcesOf("erin")).toEqual(["gone", "web"]);
    await env.index.forgetSource("gone");
    expect(await env.index.sourcesOf("erin")).toEqual(["web"]);
    expect(await env.index.sourcesOf("frank")).toEqual([]);
    const writes = env.index.stats.writes;
    await env.index.remember("frank", "gone");
    expect(env.index.stats.writes).toBe(writes + 1);
  });

  it("keeps the LRU bounded", async () => {
    const small = await UserSourceIndex.open(env.nc, { capacity: 50 });
    for (let i = 0; i < 200; i++) await small.remember(`lru-${i}`, "web");
    expect(small.stats.cached).toBe(50);
    expect(await small.sourcesOf("lru-0")).toEqual(["web"]);
    small.close();
  });

  it("forgets pairs everywhere: purged from the bucket, dropped from every replica's memory", async () => {
    const other = await UserSourceIndex.open(env.nc);
    await env.index.remember("forget-me", "web");
    await other.remember("forget-me", "web");
    expect(other.stats.writes).toBe(0);
    const cached = other.stats.cached;
    await env.index.forget("forget-me", ["web"]);
    expect(await other.sourcesOf("forget-me")).toEqual([]);
    await until(() => other.stats.cached < cached, {
      message: "the other replica to drop the pair from memory",
    });
    // The other replica records the pair again on the next call.
    const writes = other.stats.writes;
    await other.remember("forget-me", "web");
    expect(other.stats.writes).toBe(writes + 1);
    expect(await env.index.sourcesOf("forget-me")).toEqual(["web"]);
    other.close();
  });
});

describe("deleteUser", () => {
  const deps = (): DeleteDeps => ({ nc: env.nc, config, log, index: env.index, deletions });

  it("notifies exactly the existing sources the user was seen in, then forgets them", async () => {
    await purgeEvents(env.jsm);
    await env.index.remember("bob", "web");
    await env.index.remember("bob", "android");
    await env.index.remember("bob", "deleted-source");
    await env.index.remember("carol", "ios");
    const now = new Date("2026-11-21T09:30:00.000Z");
    const res = await deleteUser({ ...deps(), now: () => now }, "bob");
    expect(res.requestId).toMatch(/^del_/);
    expect(res.sourceIds).toEqual(["android", "web"]);

    const events = await readEvents(env.jsm);
    expect(events).toHaveLength(2);
    for (const e of events) {
      expect(e.subject).toBe(eventSubject(e.call.sourceId, "delete"));
      expect(e.msgId).toBe(`${e.call.sourceId}:${e.call.messageId}`);
      expect(e.call).toEqual({
        type: "delete",
        messageId: e.call.messageId,
        sourceId: e.call.sourceId,
        receivedAt: "2026-11-21T09:30:00.000Z",
        timestamp: "2026-11-21T09:30:00.000Z",
        userId: "bob",
      });
    }
    expect(new Set(events.map((e) => e.call.sourceId))).toEqual(new Set(["web", "android"]));
    expect(new Set(events.map((e) => e.call.messageId)).size).toBe(2);

    // The index no longer holds bob for the notified sources; carol is untouched.
    expect(await env.index.sourcesOf("bob")).toEqual(["deleted-source"]);
    expect(await env.index.sourcesOf("carol")).toEqual(["ios"]);
    // A repeated deletion without new calls notifies nobody.
    expect((await deleteUser(deps(), "bob")).sourceIds).toEqual([]);
    // New calls after the deletion are recorded again.
    await env.index.remember("bob", "web");
    expect(await env.index.sourcesOf("bob", ["web", "ios", "android"])).toEqual(["web"]);
  });

  it("answers an unknown user with an empty list and publishes nothing", async () => {
    await purgeEvents(env.jsm);
    const res = await deleteUser(deps(), "nobody-ever");
    expect(res.sourceIds).toEqual([]);
    expect(res.requestId).toMatch(/^del_/);
    expect(await readEvents(env.jsm)).toHaveLength(0);
  });

  it("validates the user id", async () => {
    for (const bad of ["", "x".repeat(40_000)]) {
      const err = await deleteUser(deps(), bad).catch((e) => e);
      expect(err).toBeInstanceOf(HookpostError);
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.fieldViolations[0].field).toBe("user_id");
    }
  });

  it("keeps the entries of sources whose notification failed, so a retry notifies only those", async () => {
    await purgeEvents(env.jsm);
    await env.index.remember("dave", "web");
    await env.index.remember("dave", "ios");
    const err = await deleteUser(
      {
        ...deps(),
        publish: async (call) => {
          if (call.sourceId === "ios") throw new HookpostError(Code.UNAVAILABLE, "boom");
        },
      },
      "dave",
    ).catch((e) => e);
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(err.message).toContain("1 of 2");
    expect(await env.index.sourcesOf("dave")).toEqual(["ios"]);
    expect((await deleteUser(deps(), "dave")).sourceIds).toEqual(["ios"]);
  });
});
