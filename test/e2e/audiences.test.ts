import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, HookpostError } from "@hookpost/contract";
import type { SyncAudienceRequestSchema } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { eventSubject } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, Stack } from "../helpers/stack.js";
import { bodies, STACK_OPTIONS, settledCount } from "./helpers.js";

/*
 * Audiences and computed traits (SPEC section 7) through the real pipeline: SyncAudience /
 * SyncComputedTrait (client-streaming gRPC, write key) -> identify calls on JetStream ->
 * dispatcher -> the source's destination, a real HTTP receiver.
 */

let stack: Stack;
const receivers: Receiver[] = [];

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

beforeAll(async () => {
  stack = await Stack.start(STACK_OPTIONS);
});

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await stack?.close();
});

/** A source whose one destination delivers to a receiver of its own. */
async function lane(name: string): Promise<{ id: string; client: IngestClient; rx: Receiver }> {
  const rx = await Receiver.http();
  receivers.push(rx);
  const src = await stack.source(name);
  await stack.destination({ name, sourceIds: [src.id], urls: [rx.url()] });
  return { id: src.id, client: src.client, rx };
}

type AudienceRequest = MessageInitShape<typeof SyncAudienceRequestSchema>;
type ValueInit = MessageInitShape<typeof ValueSchema>;

/** The audience named on the first message, members in chunks of `size` on the following ones. */
function audience(name: string, ids: string[], size = 2): AudienceRequest[] {
  const out: AudienceRequest[] = [{ audienceName: name }];
  for (let i = 0; i < ids.length; i += size) out.push({ userIds: ids.slice(i, i + size) });
  return out;
}

const num = (value: number): ValueInit => ({ kind: { case: "numberValue", value } });

/** Trait name first, then one message per user (any chunking is fine). */
function trait(name: string, values: Record<string, number>) {
  return [
    { traitName: name },
    ...Object.entries(values).map(([user, v]) => ({ values: { [user]: num(v) } })),
  ];
}

/** Trait values by user of the identify calls a receiver got from index `from` on. */
function traitsByUser(rx: Receiver, key: string, from = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const b of bodies(rx).slice(from)) {
    expect(b.type).toBe("identify");
    const user = b.userId as string;
    expect(out).not.toHaveProperty(user); // one call per user
    out[user] = (b.traits as Record<string, unknown>)[key];
    expect(Object.keys(b.traits as object)).toEqual([key]);
  }
  return out;
}

/**
 * Waits until the receiver has `count` requests and shows that nothing more comes: a marker call
 * sent afterwards is delivered, and then some more time passes.
 */
async function expectExactly(lane: { client: IngestClient; rx: Receiver }, count: number): Promise<void> {
  await lane.rx.waitFor(count);
  const { messageId } = await lane.client.track({ userId: "marker", event: "Marker" });
  await lane.rx.waitFor(count + 1);
  expect(await settledCount(lane.rx, 500)).toBe(count + 1);
  const marker = lane.rx.requests.findIndex((r) => r.headers["idempotency-key"] === messageId);
  expect(marker).toBeGreaterThanOrEqual(0);
  lane.rx.requests.splice(marker, 1);
}

describe("SyncAudience end to end", () => {
  let hv: { id: string; client: IngestClient; rx: Receiver };

  beforeAll(async () => {
    hv = await lane("audiences");
  });

  it("first sync: every member gets identify {high_value_users: true}", async () => {
    const before = Date.now();
    const r = await hv.client.syncAudience(audience("High Value Users", ["a", "b", "c"]));
    const after = Date.now();
    expect(r).toMatchObject({ members: 3n, joined: 3n, left: 0n });
    await expectExactly(hv, 3);
    expect(traitsByUser(hv.rx, "high_value_users")).toEqual({ a: true, b: true, c: true });
    expect(hv.rx.messageIds().size).toBe(3);

    const req = hv.rx.requests.find((q) => q.body.includes('"userId":"a"'))!;
    const text = req.body.toString();
    const { timestamp, context } = JSON.parse(text) as { timestamp: string; context: unknown };
    expect(timestamp).toMatch(ISO_MS);
    expect(Date.parse(timestamp)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(timestamp)).toBeLessThanOrEqual(after);
    expect(context).toEqual(expect.any(Object));
    expect(Array.isArray(context)).toBe(false);
    expect(text).toBe(
      `{"version":1,"type":"identify","userId":"a","traits":{"high_value_users":true},` +
        `"timestamp":"${timestamp}","context":${JSON.stringify(context)}}`,
    );
    expect(req.headers["user-agent"]).toBe("Hookpost/1.0");
    expect(req.headers["content-type"]).toBe("application/json");
  });

  it("later sync: only the changes (d joins: true, a left: false)", async () => {
    const seen = hv.rx.requests.length;
    const r = await hv.client.syncAudience(audience("High Value Users", ["b", "c", "d"], 1));
    expect(r).toMatchObject({ members: 3n, joined: 1n, left: 1n });
    await expectExactly(hv, seen + 2);
    expect(traitsByUser(hv.rx, "high_value_users", seen)).toEqual({ d: true, a: false });
    expect(hv.rx.messageIds().size).toBe(seen + 2);
  });

  it("an unchanged sync (any order, repeats) sends nothing", async () => {
    const seen = hv.rx.requests.length;
    const r = await hv.client.syncAudience(audience("High Value Users", ["d", "c", "b", "c"], 3));
    expect(r).toMatchObject({ members: 3n, joined: 0n, left: 0n });
    await expectExactly(hv, seen);
  });

  it('"highValueUsers" is the same audience: no duplicates of the stored state, only its changes', async () => {
    const seen = hv.rx.requests.length;
    const same = await hv.client.syncAudience(audience("highValueUsers", ["b", "c", "d"]));
    expect(same).toMatchObject({ members: 3n, joined: 0n, left: 0n });
    await expectExactly(hv, seen);

    const r = await hv.client.syncAudience(audience("highValueUsers", ["b", "c", "d", "e"]));
    expect(r).toMatchObject({ members: 4n, joined: 1n, left: 0n });
    await expectExactly(hv, seen + 1);
    expect(traitsByUser(hv.rx, "high_value_users", seen)).toEqual({ e: true });
  });
});

describe("SyncComputedTrait end to end", () => {
  it('"Lifetime Value": changed values and users who left (null) only', async () => {
    const lt = await lane("traits");
    const first = await lt.client.syncComputedTrait(trait("Lifetime Value", { a: 10, b: 20 }));
    expect(first).toMatchObject({ users: 2n, changed: 2n, left: 0n });
    await expectExactly(lt, 2);
    expect(traitsByUser(lt.rx, "lifetime_value")).toEqual({ a: 10, b: 20 });

    const second = await lt.client.syncComputedTrait(trait("Lifetime Value", { a: 10, b: 25, c: 5 }));
    expect(second).toMatchObject({ users: 3n, changed: 2n, left: 0n });
    await expectExactly(lt, 4);
    expect(traitsByUser(lt.rx, "lifetime_value", 2)).toEqual({ b: 25, c: 5 });

    const third = await lt.client.syncComputedTrait(trait("Lifetime Value", { a: 10 }));
    expect(third).toMatchObject({ users: 1n, changed: 0n, left: 2n });
    await expectExactly(lt, 6);
    expect(traitsByUser(lt.rx, "lifetime_value", 4)).toEqual({ b: null, c: null });
    const nullBody = lt.rx.requests.slice(4).find((q) => q.body.includes('"userId":"b"'))!;
    expect(nullBody.body.toString()).toContain('"traits":{"lifetime_value":null}');
    expect(lt.rx.messageIds().size).toBe(6);
  });
});

describe("interrupted syncs", () => {
  const N = 3000;
  const members = Array.from({ length: N }, (_, i) => `member-${String(i).padStart(5, "0")}`);

  it("aborted while uploading, then cancelled while publishing; the retry delivers each identify once", async () => {
    const big = await lane("interrupted");

    // 1. The request stream fails after two chunks: the call is cancelled, nothing is sent.
    async function* failing() {
      const reqs = audience("Big Spenders", members, 500);
      yield reqs[0]!;
      yield reqs[1]!;
      yield reqs[2]!;
      throw new Error("upstream export broke");
    }
    const uploadErr = await big.client.syncAudience(failing()).catch((e: unknown) => e);
    expect(uploadErr).toBeInstanceOf(HookpostError);
    expect((uploadErr as HookpostError).code).toBe(Code.CANCELLED);
    expect((uploadErr as HookpostError).message).toMatch(/upstream export broke/);
    expect(await settledCount(big.rx, 300)).toBe(0);

    // 2. The whole list is sent, and the call is cancelled once the first identify was stored.
    let stored = 0;
    const abort = new AbortController();
    const sub = stack.nc.subscribe(eventSubject(big.id, "identify"), {
      callback: () => {
        stored++;
        abort.abort();
      },
    });
    const cancelErr = await big.client
      .syncAudience(audience("Big Spenders", members, 500), { signal: abort.signal })
      .catch((e: unknown) => e);
    expect(cancelErr).toBeInstanceOf(HookpostError);
    expect((cancelErr as HookpostError).code).toBe(Code.CANCELLED);
    await settledCount(big.rx, 300);
    const partial = stored;
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(N); // interrupted half way: the membership was not replaced

    // 3. The retry with the same list: every member gets exactly one identify call.
    const r = await big.client.syncAudience(audience("Big Spenders", members, 500));
    expect(r).toMatchObject({ members: BigInt(N), joined: BigInt(N), left: 0n });
    await big.rx.waitFor(N, 45_000);
    expect(await settledCount(big.rx, 800)).toBe(N);
    expect(big.rx.messageIds().size).toBe(N);
    expect(traitsByUser(big.rx, "big_spenders")).toEqual(Object.fromEntries(members.map((m) => [m, true])));
    sub.unsubscribe();

    // And the audience is stored: the same list again changes nothing.
    const again = await big.client.syncAudience(audience("Big Spenders", members, 1000));
    expect(again).toMatchObject({ members: BigInt(N), joined: 0n, left: 0n });
    await expectExactly(big, N);
  }, 90_000);
});
