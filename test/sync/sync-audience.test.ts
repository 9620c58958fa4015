import { syncAudience } from "@hookpost/api";
import { Code, HookpostError } from "@hookpost/contract";
import { eventSubject, membershipObjectName } from "@hookpost/core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  audienceMessages,
  chunks,
  type Env,
  purgeEvents,
  range,
  readEvents,
  startEnv,
  traitValues,
} from "./helpers.js";

let env: Env;

beforeAll(async () => {
  // Small runs so that the external sort spills and merges even in tests.
  env = await startEnv({ runEntries: 300, maxInFlight: 64 });
});
afterAll(async () => {
  await env?.close();
});
beforeEach(async () => {
  await purgeEvents(env.jsm);
});

const sync = (name: string, ids: string[], sourceId = "web", size = 250) =>
  syncAudience(env.deps, sourceId, chunks(audienceMessages(name, ids, size)));

async function storedMembers(sourceId: string, key: string): Promise<string[]> {
  const info = await env.memberships.info(membershipObjectName(sourceId, "audience", key));
  if (!info) return [];
  const src = env.memberships.source(info);
  const out: string[] = [];
  for (let e = await src.next(); e; e = await src.next()) out.push(e.id);
  return out;
}

describe("syncAudience", () => {
  it("first sync: one identify call with <key>: true per member (duplicates once)", async () => {
    const ids = range(1000);
    const at = new Date("2026-11-21T09:30:00.000Z");
    const res = await syncAudience(
      { ...env.deps, now: () => at },
      "web",
      chunks(audienceMessages("High Value Users", [...ids, "user-5", "user-77"], 130)),
    );
    expect(res).toEqual({ members: 1000, joined: 1000, left: 0 });
    const events = await readEvents(env.jsm);
    expect(events).toHaveLength(1000);
    const values = traitValues(events, "high_value_users");
    expect([...values.keys()].sort()).toEqual([...ids].sort());
    expect(new Set(values.values())).toEqual(new Set([true]));
    const e = events[0]!;
    expect(e.subject).toBe(eventSubject("web", "identify"));
    expect(e.msgId).toBe(`web:${e.call.messageId}`);
    expect(e.call.messageId.length).toBeLessThanOrEqual(100);
    expect(e.call).toEqual({
      type: "identify",
      messageId: e.call.messageId,
      sourceId: "web",
      receivedAt: "2026-11-21T09:30:00.000Z",
      timestamp: "2026-11-21T09:30:00.000Z",
      userId: e.call.userId,
      context: { audience: { name: "High Value Users", key: "high_value_users" } },
      traits: { high_value_users: true },
    });
    expect(await storedMembers("web", "high_value_users")).toEqual([...ids].sort());
    // Members were recorded for deletion requests.
    expect(await env.index.sourcesOf("user-42")).toEqual(["web"]);
  });

  it("later syncs send only joins (true) and leaves (false); the renamed-case name is the same audience", async () => {
    const ids = range(1000).filter((_, i) => i % 10 !== 3); // 100 leave
    ids.push(...range(50, "newbie-")); // 50 join
    const res = await sync("highValueUsers", ids.reverse(), "web", 97);
    expect(res).toEqual({ members: 950, joined: 50, left: 100 });
    const values = traitValues(await readEvents(env.jsm), "high_value_users");
    expect(values.size).toBe(150);
    for (const [user, value] of values) {
      expect(value).toBe(user.startsWith("newbie-"));
      if (!user.startsWith("newbie-")) expect(Number(user.slice(5)) % 10).toBe(3);
    }
    expect(await storedMembers("web", "high_value_users")).toEqual([...ids].sort());
  });

  it("an unchanged re-sync publishes nothing", async () => {
    const ids = await storedMembers("web", "high_value_users");
    const before = await env.memberships.info(membershipObjectName("web", "audience", "high_value_users"));
    const res = await sync("HIGH VALUE USERS", [...ids].reverse());
    expect(res).toEqual({ members: 950, joined: 0, left: 0 });
    expect(await readEvents(env.jsm)).toHaveLength(0);
    const after = await env.memberships.info(membershipObjectName("web", "audience", "high_value_users"));
    expect(after?.revision).toBe(before?.revision);
  });

  it("keeps audiences of different sources and names apart", async () => {
    const res = await sync("High Value Users", ["a", "b"], "ios");
    expect(res).toEqual({ members: 2, joined: 2, left: 0 });
    const res2 = await sync("Churn Risk", ["a"], "web");
    expect(res2).toEqual({ members: 1, joined: 1, left: 0 });
    const events = await readEvents(env.jsm);
    expect(events.map((e) => [e.call.sourceId, e.call.userId, e.call.traits]).sort()).toEqual(
      [
        ["ios", "a", { high_value_users: true }],
        ["ios", "b", { high_value_users: true }],
        ["web", "a", { churn_risk: true }],
      ].sort(),
    );
  });

  it("an empty member list makes everyone leave; a user who rejoins and leaves again is sent again", async () => {
    expect(await sync("Flappers", ["x", "y"])).toEqual({ members: 2, joined: 2, left: 0 });
    expect(await sync("Flappers", [])).toEqual({ members: 0, joined: 0, left: 2 });
    expect(await sync("Flappers", ["x"])).toEqual({ members: 1, joined: 1, left: 0 });
    expect(await sync("Flappers", [])).toEqual({ members: 0, joined: 0, left: 1 });
    const events = (await readEvents(env.jsm)).filter((e) => e.call.traits && "flappers" in e.call.traits);
    // Same change twice (x leaves) in different generations: two distinct calls, both stored.
    expect(events.map((e) => [e.call.userId, e.call.traits!.flappers])).toEqual([
      ["x", true],
      ["y", true],
      ["x", false],
      ["y", false],
      ["x", true],
      ["x", false],
    ]);
  });

  it("handles ids with newlines, tabs, backslashes and unicode", async () => {
    const odd = ["line\nbreak", "tab\tbed", "back\\slash", "ünï 🙂", "\\n"];
    expect(await sync("Odd Ids", odd)).toEqual({ members: 5, joined: 5, left: 0 });
    const joined = traitValues(await readEvents(env.jsm), "odd_ids");
    expect([...joined.keys()].sort()).toEqual([...odd].sort());
    await purgeEvents(env.jsm);
    expect(await sync("Odd Ids", odd.slice(1))).toEqual({ members: 4, joined: 0, left: 1 });
    const left = traitValues(await readEvents(env.jsm), "odd_ids");
    expect([...left.entries()]).toEqual([["line\nbreak", false]]);
  });

  it("rejects invalid requests with field violations, publishing nothing", async () => {
    const cases: Array<[Array<{ audienceName: string; userIds: string[] }>, string]> = [
      [[], "audience_name"],
      [[{ audienceName: "", userIds: ["a"] }], "audience_name"],
      [[{ audienceName: "!!!", userIds: ["a"] }], "audience_name"],
      [[{ audienceName: "x".repeat(300), userIds: [] }], "audience_name"],
      [
        [
          { audienceName: "Bad Ids", userIds: ["a"] },
          { audienceName: "", userIds: ["b", "c", "d", ""] },
        ],
        "user_ids[3]",
      ],
      [[{ audienceName: "Bad Ids", userIds: ["y".repeat(9000)] }], "user_ids[0]"],
      [
        [
          { audienceName: "Bad Ids", userIds: ["a"] },
          { audienceName: "Other", userIds: ["b"] },
        ],
        "audience_name",
      ],
    ];
    for (const [messages, field] of cases) {
      const err = await syncAudience(env.deps, "web", chunks(messages)).catch((e) => e);
      expect(err).toBeInstanceOf(HookpostError);
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.fieldViolations.map((v: { field: string }) => v.field)).toContain(field);
    }
    expect(await readEvents(env.jsm)).toHaveLength(0);
    expect(await env.memberships.info(membershipObjectName("web", "audience", "bad_ids"))).toBeUndefined();
  });

  it("an input stream that fails half way publishes nothing and changes nothing", async () => {
    async function* broken() {
      yield { audienceName: "Broken", userIds: range(500) };
      throw new Error("client went away");
    }
    await expect(syncAudience(env.deps, "web", broken())).rejects.toThrow("client went away");
    expect(await readEvents(env.jsm)).toHaveLength(0);
    expect(await env.memberships.info(membershipObjectName("web", "audience", "broken"))).toBeUndefined();
    // The retry sends every member once.
    expect(await sync("Broken", range(800))).toEqual({ members: 800, joined: 800, left: 0 });
    const events = await readEvents(env.jsm);
    expect(new Set(events.map((e) => e.msgId)).size).toBe(800);
    expect(events).toHaveLength(800);
  });

  it("serializes concurrent syncs of one audience: the second diffs against the first", async () => {
    const lists = [
      ["a", "b"],
      ["b", "c"],
    ];
    const results = await Promise.all(lists.map((ids) => sync("Concurrent", ids)));
    const firstIndex = results.findIndex((r) => r.joined === 2);
    expect(firstIndex).toBeGreaterThanOrEqual(0);
    expect(results[1 - firstIndex]).toEqual({ members: 2, joined: 1, left: 1 });
    expect(await storedMembers("web", "concurrent")).toEqual(lists[1 - firstIndex]);
    expect(await readEvents(env.jsm)).toHaveLength(4);
  });

  it("a cancelled sync keeps the stored membership", async () => {
    await sync("Cancel Me", ["a"]);
    const before = await env.memberships.info(membershipObjectName("web", "audience", "cancel_me"));
    const abort = new AbortController();
    abort.abort();
    const err = await syncAudience(env.deps, "web", chunks(audienceMessages("Cancel Me", ["b"])), {
      signal: abort.signal,
    }).catch((e) => e);
    expect(err.code).toBe(Code.CANCELLED);
    const after = await env.memberships.info(membershipObjectName("web", "audience", "cancel_me"));
    expect(after?.revision).toBe(before?.revision);
  });
});
