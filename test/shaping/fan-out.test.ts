import type { HookpostError } from "@hookpost/contract";
import {
  AttemptOutcome,
  DeliveryMode,
  DeliveryState,
  Ordering,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { verifySegmentRequest } from "@hookpost/receiver";
import { describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { untilDeadLetters } from "../helpers/dead-letters.js";
import type { Receiver } from "../helpers/receiver.js";
import { until } from "../helpers/until.js";
import { useReceiverStack } from "../helpers/use-receiver-stack.js";

/**
 * Fan-out (issue 27, docs/design/shaping.md section 7.2) end to end: real ingest, NATS, two
 * dispatcher replicas and receivers. Every URL of a FAN_OUT destination gets every call, each URL
 * with its own retries, attempt records, timeline and dead letters.
 */

const SECRET = "fan-secret";
const { stack, src, rx } = useReceiverStack("fan-out", ["failing", "healthy", "testA", "testB"], {
  ...STACK_OPTIONS,
  dispatchers: 2,
  // The failing URL's breaker would open after 5 failures and probe it slowly, which is right
  // but not what this test is about: its retries and dead letters per URL.
  dispatcher: { ...STACK_OPTIONS.dispatcher, retryBaseDelayMs: 200, breakerFailures: 1000 },
});

/** Requests per Idempotency-Key at a receiver. */
function perKey(r: Receiver): Map<string, number> {
  const out = new Map<string, number>();
  for (const req of r.requests) {
    const k = String(req.headers["idempotency-key"]);
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}

describe("fan-out", () => {
  it("every URL gets every call, each with its own retries, timeline and dead letters; replay goes to that URL", async () => {
    // The failing URL comes first: with failover it would be tried first and the second only
    // after it failed; with fan-out neither waits for the other.
    const tries = new Map<string, number>();
    rx.failing!.respond = (req) => {
      const key = String(req.headers["idempotency-key"]);
      const n = (tries.get(key) ?? 0) + 1;
      tries.set(key, n);
      return { status: n <= 2 ? 503 : 422 };
    };
    const dest = await stack.destination({
      name: "audit",
      sourceIds: [src.id],
      urls: [rx.failing!.url("/in"), rx.healthy!.url("/in")],
      sharedSecret: SECRET,
      filter: { events: ["Fanned"] },
      deliveryMode: DeliveryMode.FAN_OUT,
    });
    expect(dest.deliveryMode).toBe(DeliveryMode.FAN_OUT);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++)
      ids.push((await src.client.track({ userId: `f${i}`, event: "Fanned" })).messageId);

    // The healthy URL: each call once, signed, never again however the other URL fares.
    await until(() => perKey(rx.healthy!).size === 10, { message: "10 calls at the healthy URL" });
    for (const req of rx.healthy!.requests)
      expect(verifySegmentRequest(req.body, req.headers, SECRET)).toBe(true);
    // The failing URL: retried on its own (503, 503, then 422: three tries each), then dead letters.
    const letters = await untilDeadLetters(stack.admin, dest.id, 10, {
      timeout: 30_000,
      message: "10 dead letters of the failing URL",
    });
    expect(new Set(letters.map((l) => l.messageId))).toEqual(new Set(ids));
    expect(letters.every((l) => l.urlIndex === 0 && l.attempts === 3)).toBe(true);
    expect([...perKey(rx.failing!).values()]).toEqual(Array(10).fill(3));
    expect([...perKey(rx.healthy!).values()]).toEqual(Array(10).fill(1));

    // One delivery per URL in the timeline, each its own state; attempts name their URL.
    const m = await stack.admin.getMessage({ messageId: ids[0]! });
    const mine = m.deliveries.filter((d) => d.destinationId === dest.id);
    expect(mine.map((d) => [d.urlIndex, d.state])).toEqual([
      [0, DeliveryState.DEAD_LETTER],
      [1, DeliveryState.DELIVERED],
    ]);
    const attempts = (await stack.admin.listAttempts({ destinationId: dest.id, messageId: ids[0]! }))
      .attempts;
    expect(attempts.filter((a) => a.urlIndex === 0)).toHaveLength(3);
    expect(attempts.filter((a) => a.urlIndex === 1).map((a) => a.outcome)).toEqual([AttemptOutcome.SUCCESS]);

    // Replayed, a dead letter goes to its own URL again, never to the one that has the call.
    rx.failing!.respond = () => ({ status: 200 });
    const replayed = await stack.admin.replayDeadLetters({ destinationId: dest.id });
    expect(replayed.replayed).toBe(10);
    await until(() => [...perKey(rx.failing!).values()].every((n) => n === 4), {
      message: "each replayed call at the failing URL once more",
    });
    const after = await until(
      async () => {
        const d = (await stack.admin.getMessage({ messageId: ids[0]! })).deliveries;
        return d.every((x) => x.state === DeliveryState.DELIVERED) && d;
      },
      { message: "both URLs delivered in the timeline" },
    );
    expect(after).toHaveLength(2);
    expect([...perKey(rx.healthy!).values()]).toEqual(Array(10).fill(1));
  });

  it("a test call goes to every URL, and a URL removed later leaves its deliveries not sent, never dropped", async () => {
    rx.testB!.respond = () => ({ status: 503 });
    const dest = await stack.destination({
      name: "two",
      sourceIds: [src.id],
      urls: [rx.testA!.url("/a"), rx.testB!.url("/b")],
      filter: { events: ["Two"] },
      deliveryMode: DeliveryMode.FAN_OUT,
    });
    const test = await stack.admin.sendTestCall({
      destinationId: dest.id,
      callJson: JSON.stringify({ type: "track", userId: "t0", event: "Two" }),
    });
    expect(new Set(test.attempts.map((a) => a.urlIndex))).toEqual(new Set([0, 1]));
    expect(rx.testA!.requests).toHaveLength(1);
    expect(rx.testB!.requests).toHaveLength(1);

    const { messageId } = await src.client.track({ userId: "t1", event: "Two" });
    await until(() => perKey(rx.testB!).get(messageId), { message: "the call tried at URL 1" });
    // URL 1 goes while its delivery waits for a retry: the next attempt sends nothing and says why.
    await stack.admin.updateDestination({
      destination: { id: dest.id, urls: [rx.testA!.url("/a")] },
      updateMask: { paths: ["urls"] },
    });
    const notSent = await until(
      async () =>
        (await stack.admin.listAttempts({ destinationId: dest.id, messageId })).attempts.find(
          (a) => a.urlIndex === 1 && a.outcome === AttemptOutcome.NOT_SENT,
        ),
      { timeout: 20_000, message: "a not-sent attempt for the removed URL" },
    );
    expect(notSent.reason).toContain("URL 1 of the destination is no longer configured");
  });

  it("refuses FAN_OUT with PER_USER ordering", async () => {
    const err = (await stack.admin
      .createDestination({
        destination: {
          name: "x",
          sourceIds: [src.id],
          urls: [rx.testA!.url("/x"), rx.testB!.url("/x")],
          deliveryMode: DeliveryMode.FAN_OUT,
          ordering: Ordering.PER_USER,
        },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      )) as HookpostError | undefined;
    expect(err?.codeName).toBe("INVALID_ARGUMENT");
    expect(err!.fieldViolations.map((v) => v.field)).toContain("destination.delivery_mode");
  });
});
