import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { adminMetadata, createClient } from "@hookpost/client";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import {
  ATTEMPTS_STREAM,
  DEAD_STREAM,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  DeadLetters,
  DeletionStore,
  ErasureWorker,
  MembershipStore,
  userHash,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/*
 * Copies of a call made after the request's settle time. A retried delivery is stored again on its
 * lane at every retry, and becomes a dead letter at the end; each copy is a new message, stored
 * now. When no pass ran early enough (the API that took the request stopped; a long pass), the
 * copies of a call accepted before the request are stored after request + ERASURE_SETTLE, and must
 * still be erased: they are the same call, not new data. And a pass that erases a delivery while
 * its attempt is under way must not let the request be done before that attempt's copy (parked
 * again, or its records) is stored and erased too.
 */

let stack: Stack;
let src: { id: string; client: IngestClient };
let dying: Receiver;
let held: Receiver;
let worker: ErasureWorker | undefined;
const GONE = `copy-gone-${randomBytes(6).toString("hex")}`;
const KEPT = `copy-kept-${randomBytes(6).toString("hex")}`;
const GONE_USER = "copies-user-gone";
const KEPT_USER = "copies-user-kept";
/** Longer than an attempt (WEBHOOK_TIMEOUT_MS below, one URL), as the settings require. */
const SETTLE_MS = 2000;
const TIMEOUT_MS = 1000;

beforeAll(async () => {
  // This API's worker would look only in an hour, and it stops right after taking the request.
  stack = await Stack.start({
    ingest: { erasure: { intervalMs: 3_600_000, settleMs: SETTLE_MS, statusMaxAgeMs: 86_400_000 } },
    dispatcher: {
      ...STACK_OPTIONS.dispatcher,
      webhookTimeoutMs: TIMEOUT_MS,
      retryBaseDelayMs: 200,
      topology: { ...DEFAULT_TOPOLOGY, retryWindowMs: 120_000, retryMaxDelayMs: 400 },
      // Every failure is attempted: no breaker holds deliveries back.
      breakerFailures: 1000,
    },
  });
  src = await stack.source("copies");
  [dying, held] = (await Promise.all([Receiver.http(), Receiver.http()])) as [Receiver, Receiver];
  dying.respond = () => ({ status: 500 });
  held.respond = () => ({ status: 500 });
  await stack.destination({ id: "dying", sourceIds: [src.id], urls: [dying.url()] });
  await stack.destination({ id: "held", sourceIds: [src.id], urls: [held.url()] });
});

afterAll(async () => {
  worker?.close();
  await stack?.close();
  await Promise.all([dying?.close(), held?.close()]);
});

const requestsWith = (r: Receiver, marker: string) => r.requests.filter((q) => q.body.includes(marker));

/** Messages of the streams whose headers or data contain `text`, read one by one as stored. */
async function matches(jsm: JetStreamManager, text: string, streams: readonly string[]): Promise<number> {
  let found = 0;
  for (const name of streams) {
    const { state } = await jsm.streams.info(name);
    for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(name, { seq }).catch(() => undefined);
      if (!m) continue;
      const headers = m.header
        ? [...m.header.keys()].map((k) => m.header.values(k).join(",")).join("\n")
        : "";
      if (headers.includes(text) || Buffer.from(m.data).includes(text)) found++;
    }
  }
  return found;
}

describe("erasure of copies made after the settle time", () => {
  it("erases the retried copies, dead letters and attempt records of a call accepted before the request", async () => {
    const jsm = await stack.nc.jetstreamManager();
    await src.client.track({ userId: GONE_USER, event: "Clicked", properties: { note: GONE } });
    await src.client.track({ userId: KEPT_USER, event: "Clicked", properties: { note: KEPT } });
    // Both destinations retry both calls (each retry stores the delivery again on the lane).
    await until(() => [dying, held].every((r) => requestsWith(r, GONE).length >= 2), {
      message: "the calls retried",
    });

    const admin = createClient(IngestService, stack.ingest.address, {
      metadata: adminMetadata(STACK_ADMIN_TOKEN),
    });
    const { requestId } = await admin.delete({ userId: GONE_USER });
    const requestedAt = Date.now();
    admin.close();
    // Stopped before its worker's first look: nothing erases for a while, the dispatcher retries on.
    await stack.ingest.close();
    // Attempts, and so copies, after the settle time.
    await until(
      () =>
        [dying, held].every((r) => requestsWith(r, GONE).some((q) => q.at > requestedAt + SETTLE_MS + 300)),
      { message: "retries after the settle time" },
    );
    // One destination now refuses: the call becomes a dead letter, stored after the settle time.
    dying.respond = () => ({ status: 400 });
    const dead = await DeadLetters.open(stack.nc);
    await until(async () => (await dead.list("dying")).filter((l) => l.body.includes(GONE)).length === 1, {
      message: "the dead letter",
    });
    // The other hangs (cut at WEBHOOK_TIMEOUT_MS): an attempt is under way when the next pass runs.
    const before = requestsWith(held, GONE).length;
    held.respond = () => ({ hang: true });
    await until(() => requestsWith(held, GONE).length > before, { message: "an attempt under way" });

    const deletions = await DeletionStore.open(stack.nc, { maxAgeMs: 86_400_000 });
    worker = new ErasureWorker(stack.nc, deletions, {
      intervalMs: 200,
      settleMs: SETTLE_MS,
      memberships: await MembershipStore.open(stack.nc),
      log: quietLogger,
    });
    worker.start();
    const done = await until(
      async () => {
        const r = await deletions.get(requestId);
        return r?.doneTime ? r : undefined;
      },
      { timeout: 40_000, interval: 100, message: "the request done" },
    );
    // An attempt under way when the request was done would have stored its copy by now.
    await sleep(TIMEOUT_MS + 1000); // not a wait: nothing of the user may appear meanwhile (the assertion)

    // Nothing of the user: no copy, no dead letter, no attempt record naming them.
    const streams = [DELIVERIES_STREAM, DEAD_STREAM, ATTEMPTS_STREAM];
    expect(await matches(jsm, GONE, streams)).toBe(0);
    expect(await matches(jsm, `"userHash":"${userHash({ userId: GONE_USER })}"`, [ATTEMPTS_STREAM])).toBe(0);
    expect(await matches(jsm, userHash({ userId: GONE_USER }), [DELIVERIES_STREAM, DEAD_STREAM])).toBe(0);
    // The other user's call is all there: its dead letter, its parked copy, its records.
    expect(await matches(jsm, KEPT, [DEAD_STREAM])).toBe(1);
    expect(await matches(jsm, KEPT, [DELIVERIES_STREAM])).toBeGreaterThan(0);
    expect(
      await matches(jsm, `"userHash":"${userHash({ userId: KEPT_USER })}"`, [ATTEMPTS_STREAM]),
    ).toBeGreaterThan(0);
    // And GetDeletion counts them.
    expect(done.erased.pendingCalls).toBeGreaterThan(0);
    expect(done.erased.deadLetters).toBeGreaterThan(0);
  }, 90_000);
});
