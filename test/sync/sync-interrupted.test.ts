import type { PublishCall, SyncDeps } from "@hookpost/api";
import { jetStreamPublisher, syncAudience } from "@hookpost/api";
import { Code, HookpostError } from "@hookpost/contract";
import { EVENTS_STREAM, membershipObjectName, toHookpostError } from "@hookpost/core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { audienceMessages, chunks, type Env, purgeEvents, range, readEvents, startEnv } from "./helpers.js";

let env: Env;
const N = 4000;
const OBJECT = membershipObjectName("web", "audience", "big_spenders");

beforeAll(async () => {
  env = await startEnv({ runEntries: 700, maxInFlight: 128, publishTimeoutMs: 1_500 });
});
afterAll(async () => {
  await env?.close();
});
beforeEach(async () => {
  await purgeEvents(env.jsm);
});

/** A publisher that stores the first `okCount` calls, then fails every later one. */
function failingAfter(okCount: number): PublishCall {
  const real = jetStreamPublisher(env.nc);
  let n = 0;
  return (call) => {
    if (++n > okCount) return Promise.reject(new HookpostError(Code.UNAVAILABLE, "injected outage"));
    return real(call);
  };
}

async function expectEachOnce(expected: number): Promise<Map<string, unknown>> {
  const events = await readEvents(env.jsm);
  const ids = new Set(events.map((e) => e.msgId));
  expect(events).toHaveLength(expected);
  expect(ids.size).toBe(expected);
  const users = new Map<string, unknown>();
  for (const e of events) users.set(e.call.userId!, e.call.traits!.big_spenders);
  expect(users.size).toBe(expected);
  return users;
}

const sync = (deps: SyncDeps, ids: string[]) =>
  syncAudience(deps, "web", chunks(audienceMessages("Big Spenders", ids, 333)));

describe("interrupted syncs", () => {
  it("a first sync that fails half way, retried, stores every identify call once", async () => {
    const ids = range(N);
    const err = await sync({ ...env.deps, publish: failingAfter(N / 2) }, ids).catch((e) => e);
    expect(err).toBeInstanceOf(HookpostError);
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(await env.memberships.info(OBJECT)).toBeUndefined(); // nothing swapped in
    const partial = (await readEvents(env.jsm)).length;
    expect(partial).toBeGreaterThanOrEqual(N / 2);
    expect(partial).toBeLessThan(N);

    expect(await sync(env.deps, ids)).toEqual({ members: N, joined: N, left: 0 });
    const users = await expectEachOnce(N);
    expect(new Set(users.values())).toEqual(new Set([true]));
  });

  it("a later sync that fails keeps the stored membership; the retry sends each change once", async () => {
    const before = await env.memberships.info(OBJECT);
    const ids = range(N).filter((_, i) => i % 4 !== 0); // 1000 leave
    ids.push(...range(1000, "joiner-")); // 1000 join
    const err = await sync({ ...env.deps, publish: failingAfter(700) }, ids).catch((e) => e);
    expect(err.code).toBe(Code.UNAVAILABLE);
    const after = await env.memberships.info(OBJECT);
    expect(after).toEqual(before);

    expect(await sync(env.deps, ids)).toEqual({ members: N, joined: 1000, left: 1000 });
    const users = await expectEachOnce(2000);
    for (const [user, value] of users) expect(value).toBe(user.startsWith("joiner-"));
    expect((await env.memberships.info(OBJECT))!.revision).toBeGreaterThan(before!.revision);
  });

  it("NATS killed mid-sync: UNAVAILABLE, membership unchanged, the retry after restart stores each call once", async () => {
    const before = await env.memberships.info(OBJECT);
    const ids = range(N, "fresh-"); // everyone leaves, N join: 2N calls
    const real = jetStreamPublisher(env.nc, 1_500);
    let acked = 0;
    let killed: Promise<void> | undefined;
    const killing: PublishCall = async (call) => {
      await real(call);
      if (++acked === N / 2) killed = env.server.kill();
    };
    const err = await sync({ ...env.deps, publish: killing }, ids).catch((e) => e);
    await killed;
    // The store's domain error, as the gRPC edge answers it.
    const answered = toHookpostError(err);
    expect(answered).toBeInstanceOf(HookpostError);
    expect(answered?.code).toBe(Code.UNAVAILABLE);

    await env.server.restart();
    await until(() => env.jsm.streams.info(EVENTS_STREAM), {
      message: "JetStream answering after the restart",
    });
    expect(await env.memberships.info(OBJECT)).toEqual(before);
    expect(await sync(env.deps, ids)).toEqual({ members: N, joined: N, left: N });
    const users = await expectEachOnce(2 * N);
    for (const [user, value] of users) expect(value).toBe(user.startsWith("fresh-"));
  });
});
