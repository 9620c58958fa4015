import { randomBytes } from "node:crypto";
import { adminMetadata, createClient } from "@hookpost/client";
import { Ordering } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import {
  DEAD_STREAM,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  MEMBERSHIPS_STREAM,
  ORDERED_STREAM,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { code } from "../helpers/grpc-code.js";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/*
 * Erasure (issue 26, docs/design/erasure.md) end to end: calls of two users, each carrying a
 * marker, go to a receiver that answers 200, one that answers 400 (dead letter at once), one that
 * answers 500 (retried, then dead-lettered at a short retry window), a paused destination (calls
 * wait on its lane) and a PER_USER destination answering 500 (calls wait on ORDERED). One user is
 * deleted; once GetDeletion says done, no message of any stream or bucket holds that user's
 * marker, while the other user's records are all still there. Both users are also members of an
 * audience and a computed trait: the stored member lists lose the deleted user's id, and the next
 * sync does not tell the destinations that user left.
 */

let stack: Stack;
let src: { id: string; client: IngestClient };
/** IngestService with the admin token (Delete needs it). */
const ingestAsAdmin = (address: string) =>
  createClient(IngestService, address, { metadata: adminMetadata(STACK_ADMIN_TOKEN) });
let admin: ReturnType<typeof ingestAsAdmin>;
const receivers: Receiver[] = [];

const ERASED = `erase-marker-${randomBytes(6).toString("hex")}`;
const KEPT = `keep-marker-${randomBytes(6).toString("hex")}`;
const ERASED_USER = "user-to-erase";
const KEPT_USER = "user-to-keep";

beforeAll(async () => {
  // The calls of failing and paused destinations must still be pending when the test looks and
  // the deletion is requested (less than the retry window after they were stored), and their last
  // copies and dead letters must be written before the request's settle time ends (the window
  // ends before it): with an 8 s window and a 10 s settle, any delay up to 8 s between sending and
  // requesting holds both (a 4 s window and a 3 s settle needed 1 to 4 s: a fast run could
  // request too early, a slow one could find nothing pending).
  stack = await Stack.start({
    ingest: { erasure: { intervalMs: 300, settleMs: 10_000, statusMaxAgeMs: 86_400_000 } },
    dispatcher: {
      ...STACK_OPTIONS.dispatcher,
      webhookTimeoutMs: 500,
      retryBaseDelayMs: 200,
      topology: { ...DEFAULT_TOPOLOGY, retryWindowMs: 8000, retryMaxDelayMs: 500 },
      // Every failure is attempted: no breaker holds deliveries back.
      breakerFailures: 1000,
    },
  });
  admin = ingestAsAdmin(stack.ingest.address);
  src = await stack.source("erasure");
  const [ok, refusing, failing, ordered] = await Promise.all([
    Receiver.http(),
    Receiver.http(),
    Receiver.http(),
    Receiver.http(),
  ]);
  receivers.push(ok!, refusing!, failing!, ordered!);
  refusing!.respond = () => ({ status: 400, body: "refused" });
  failing!.respond = () => ({ status: 500 });
  ordered!.respond = () => ({ status: 500 });
  await stack.destination({ id: "ok", sourceIds: [src.id], urls: [ok!.url()] });
  await stack.destination({ id: "refusing", sourceIds: [src.id], urls: [refusing!.url()] });
  await stack.destination({ id: "failing", sourceIds: [src.id], urls: [failing!.url()] });
  await stack.destination({ id: "paused", sourceIds: [src.id], urls: [ok!.url("/paused")], enabled: false });
  await stack.destination({
    id: "ordered",
    sourceIds: [src.id],
    urls: [ordered!.url()],
    ordering: Ordering.PER_USER,
  });

  for (const [userId, marker] of [
    [ERASED_USER, ERASED],
    [KEPT_USER, KEPT],
  ] as const) {
    await src.client.identify({ userId, traits: { note: marker } });
    for (let i = 0; i < 3; i++) {
      await src.client.track({ userId, event: "Clicked", properties: { note: marker, i } });
    }
  }
  // Both users are members (the lists stored for the next sync hold their ids).
  await src.client.syncAudience([{ audienceName: "Buyers" }, { userIds: [ERASED_USER, KEPT_USER] }]);
  await src.client.syncComputedTrait([
    { traitName: "Score" },
    { values: { [ERASED_USER]: { kind: { case: "numberValue", value: 1 } } } },
    { values: { [KEPT_USER]: { kind: { case: "numberValue", value: 2 } } } },
  ]);
  // Both users' calls reached the working receiver, and some are dead letters already.
  await ok!.waitFor(8);
  await until(async () => (await rawMatches(await stack.nc.jetstreamManager(), ERASED, [DEAD_STREAM])) >= 4, {
    timeout: 20_000,
    message: "dead letters of the user to erase",
  });
}, 60_000);

afterAll(async () => {
  admin?.close();
  await stack?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

/**
 * Messages of the given streams (every stream and bucket when none given) whose subject, headers
 * or data contain `marker`, read one by one as stored.
 */
async function rawMatches(jsm: JetStreamManager, marker: string, only?: readonly string[]): Promise<number> {
  const needle = Buffer.from(marker);
  let found = 0;
  const names: string[] = [];
  for await (const si of jsm.streams.list()) names.push(si.config.name);
  for (const name of only ?? names) {
    const { state } = await jsm.streams.info(name);
    if (state.messages === 0) continue;
    for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(name, { seq }).catch(() => undefined);
      if (!m) continue;
      const headers = m.header ? [...m.header.keys()].map((k) => `${k}:${m.header.values(k).join(",")}`) : [];
      const text = `${m.subject}\n${headers.join("\n")}`;
      if (text.includes(marker) || Buffer.from(m.data).includes(needle)) found++;
    }
  }
  return found;
}

describe("erasure of a deleted user", () => {
  it("erases the user's calls from every stream and bucket, keeps the other user's, and says so in GetDeletion", async () => {
    const jsm = await stack.nc.jetstreamManager();
    // Before: the marker is in the attempt log, dead letters and pending deliveries.
    expect(await rawMatches(jsm, ERASED)).toBeGreaterThan(0);
    const keptBefore = await rawMatches(jsm, KEPT);
    expect(await rawMatches(jsm, KEPT, [DELIVERIES_STREAM, ORDERED_STREAM])).toBeGreaterThan(0);
    expect(await rawMatches(jsm, ERASED_USER, [MEMBERSHIPS_STREAM])).toBeGreaterThan(0);

    const r = await admin.delete({ userId: ERASED_USER });
    expect(r.sourceIds).toEqual([src.id]);

    // The user goes on sending (new data, after the request): that does not hold the deletion open.
    let sending = true;
    const after = (async () => {
      for (let i = 0; sending; i++) {
        await src.client.track({
          userId: ERASED_USER,
          event: "Later",
          properties: { note: "after-deletion", i },
        });
        await new Promise((resolve) => setTimeout(resolve, 250)); // not a wait: the user's app sends a call every 250 ms
      }
    })();
    const status = await until(
      async () => {
        const s = await stack.admin.getDeletion({ requestId: r.requestId });
        return s.doneTime ? s : undefined;
      },
      { timeout: 60_000, interval: 200, message: "GetDeletion says done" },
    ).finally(() => {
      sending = false;
    });
    await after;
    expect(status.requestId).toBe(r.requestId);
    expect(status.notifiedSourceIds).toEqual([src.id]);
    expect(status.erasedDeadLetters).toBeGreaterThan(0n);
    expect(status.erasedAttemptRecords).toBeGreaterThan(0n);
    expect(status.erasedPendingCalls).toBeGreaterThan(0n);
    expect(status.erasedMemberships).toBe(2n);
    expect(status.passes).toBeGreaterThan(1);

    // Nothing of the erased user anywhere; the kept user's records are all there.
    expect(await rawMatches(jsm, ERASED)).toBe(0);
    expect(await rawMatches(jsm, KEPT)).toBeGreaterThanOrEqual(Math.min(keptBefore, 1));
    expect(await rawMatches(jsm, KEPT, [DEAD_STREAM])).toBeGreaterThan(0);
    // The member lists no longer hold the user's id (in no version or chunk); the other's stay.
    expect(await rawMatches(jsm, ERASED_USER, [MEMBERSHIPS_STREAM])).toBe(0);
    expect(await rawMatches(jsm, KEPT_USER, [MEMBERSHIPS_STREAM])).toBe(2);
    // The customer's next sync, without the user: no "left" call for someone already deleted.
    const next = await src.client.syncAudience([{ audienceName: "Buyers" }, { userIds: [KEPT_USER] }]);
    expect(next).toMatchObject({ members: 1n, joined: 0n, left: 0n });
    // What the user sent once the request had settled is new data: kept.
    expect(await rawMatches(jsm, "after-deletion")).toBeGreaterThan(0);
    // The deletion notice itself reached the working destination.
    await until(() => receivers[0]!.requests.some((q) => q.body.toString().includes('"type":"delete"')), {
      message: "deletion notice delivered",
    });
  }, 120_000);

  it("GetDeletion: NOT_FOUND for an unknown request, INVALID_ARGUMENT for what is not a request id", async () => {
    const get = (requestId: string) => code(stack.admin.getDeletion({ requestId }));
    expect(await get("del_unknown")).toBe("NOT_FOUND");
    expect(await get("not a request")).toBe("INVALID_ARGUMENT");
    expect(await get("")).toBe("INVALID_ARGUMENT");
  });
});
