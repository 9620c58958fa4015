import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { HookpostError } from "@hookpost/contract";
import { AttemptOutcome, DeliveryState, Ordering } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { verifySegmentRequest } from "@hookpost/receiver";
import { describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { untilDeadLetters } from "../helpers/dead-letters.js";
import { code } from "../helpers/grpc-code.js";
import type { Receiver } from "../helpers/receiver.js";
import type { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useReceiverStack } from "../helpers/use-receiver-stack.js";

/**
 * Batching (issue 27, docs/design/shaping.md section 7.1) end to end: real ingest, NATS, two
 * dispatcher replicas and receivers. A batching destination gets JSON arrays, signed over the
 * whole array; a failed batch comes again as the same batch (same key, same bytes); members that
 * cannot be retried become dead letters of their own.
 */

const SECRET = "batch-secret";
const { stack, src, rx } = useReceiverStack("batching", ["arrays", "retry", "dead", "bytes", "mapped"], {
  ...STACK_OPTIONS,
  dispatchers: 2,
  dispatcher: { ...STACK_OPTIONS.dispatcher, retryBaseDelayMs: 200 },
});

/** Destination `name` of the source, sending to the receiver of the same name at /batch. */
function batchDestination(name: string, init: Parameters<Stack["destination"]>[0]) {
  return stack.destination({ name, sourceIds: [src.id], urls: [rx[name]!.url("/batch")], ...init });
}

/** Sends `n` track calls of one event in one Batch RPC; their message ids in order. */
async function sendTracks(event: string, n: number, props: Record<string, unknown> = {}): Promise<string[]> {
  const r = await src.client.batch({
    calls: Array.from({ length: n }, (_, i) => ({
      call: { case: "track" as const, value: { userId: `u-${i}`, event, properties: { i, ...props } } },
    })),
  });
  return r.messageIds;
}

/** Every element of every array the receiver got, with the request that carried it. */
function elements(r: Receiver): Array<{ element: Record<string, unknown>; request: number }> {
  return r.requests.flatMap((req) => {
    const body = JSON.parse(req.body.toString()) as unknown;
    expect(Array.isArray(body)).toBe(true);
    return (body as Record<string, unknown>[]).map((element) => ({ element, request: req.n }));
  });
}

describe("batching", () => {
  it("delivers calls as signed JSON arrays of at most max_calls, each call once", async () => {
    const dest = await batchDestination("arrays", {
      sharedSecret: SECRET,
      filter: { events: ["Batched"] },
      batching: { maxCalls: 10, maxWait: durationFromMs(300) },
    });
    const ids = await sendTracks("Batched", 25);
    await until(() => elements(rx.arrays!).length >= 25, { message: "25 calls received in arrays" });
    const got = elements(rx.arrays!);
    // Each call exactly once, as its default webhook body.
    expect(got.map((g) => (g.element.properties as { i: number }).i).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 25 }, (_, i) => i),
    );
    expect(got.every((g) => g.element.type === "track" && g.element.event === "Batched")).toBe(true);
    for (const req of rx.arrays!.requests) {
      expect(JSON.parse(req.body.toString()).length).toBeLessThanOrEqual(10);
      // Signed once over the array as sent; the key names the batch, not a call.
      expect(verifySegmentRequest(req.body, req.headers, SECRET)).toBe(true);
      expect(String(req.headers["idempotency-key"])).toMatch(/^batch_[0-9a-f]{32}$/);
      expect(req.headers["content-type"]).toBe("application/json");
    }
    // Fewer requests than calls: that is the point.
    expect(rx.arrays!.requests.length).toBeLessThan(25);
    // Each call's timeline says delivered, with the batch that carried it.
    const attempt = await until(
      async () =>
        (await stack.admin.listAttempts({ destinationId: dest.id, messageId: ids[3]! })).attempts[0],
      { message: "the attempt of a batched call recorded" },
    );
    expect(attempt.outcome).toBe(AttemptOutcome.SUCCESS);
  });

  it("a failed batch is retried as the same batch: same members, key and bytes", async () => {
    let refused = 0;
    rx.retry!.respond = () => (refused++ < 2 ? { status: 503 } : { status: 200 });
    await batchDestination("retry", {
      sharedSecret: SECRET,
      filter: { events: ["Retried"] },
      // All 8 calls are one batch: it goes as soon as it holds 8 (max_calls), and max_wait is long
      // enough for all of them to arrive on a loaded machine (with 2 s the first calls routed
      // could go as a smaller batch before the last ones arrived).
      batching: { maxCalls: 8, maxWait: durationFromMs(30_000) },
    });
    await sendTracks("Retried", 8);
    const [first, second, third] = await rx.retry!.waitFor(3, 20_000);
    for (const req of [second!, third!]) {
      expect(req.headers["idempotency-key"]).toBe(first!.headers["idempotency-key"]);
      expect(req.body.toString()).toBe(first!.body.toString());
      expect(verifySegmentRequest(req.body, req.headers, SECRET)).toBe(true);
    }
    expect(JSON.parse(first!.body.toString())).toHaveLength(8);
    // Delivered with the third request: nothing more comes.
    await until(() => rx.retry!.requests.length === 3, { message: "exactly 3 requests" });
  });

  it("members a batch cannot deliver become dead letters of their own, with the batch in the reason", async () => {
    rx.dead!.respond = () => ({ status: 422 });
    const dest = await batchDestination("dead", {
      filter: { events: ["Refused"] },
      // One batch of 4, sent once it holds 4: max_wait only has to outlast the calls' arrival.
      batching: { maxCalls: 4, maxWait: durationFromMs(30_000) },
    });
    const ids = await sendTracks("Refused", 4);
    const letters = await untilDeadLetters(stack.admin, dest.id, 4, {
      timeout: 20_000,
      message: "4 dead letters",
    });
    expect(new Set(letters.map((l) => l.messageId))).toEqual(new Set(ids));
    for (const l of letters) {
      expect(l.reason).toMatch(/422 is not retried.*\(batch batch_[0-9a-f]{32} of 4\)/);
      // Each keeps its own call's body, so it replays on its own.
      expect(JSON.parse(l.body)).toMatchObject({ type: "track", event: "Refused" });
    }
    const m = await stack.admin.getMessage({ messageId: ids[0]! });
    expect(m.deliveries.find((d) => d.destinationId === dest.id)?.state).toBe(DeliveryState.DEAD_LETTER);
  });

  it("max_bytes splits batches by the size of the array sent", async () => {
    await batchDestination("bytes", {
      filter: { events: ["Sized"] },
      batching: { maxCalls: 1000, maxBytes: 2048, maxWait: durationFromMs(500) },
    });
    await sendTracks("Sized", 20, { pad: "x".repeat(300) });
    await until(() => elements(rx.bytes!).length >= 20, { message: "20 calls received" });
    expect(rx.bytes!.requests.length).toBeGreaterThan(1);
    for (const req of rx.bytes!.requests) expect(req.body.length).toBeLessThanOrEqual(2048);
  });

  it("a mapping renders each element; the filter leaves calls out as filtered; the dry run shows a batch of one", async () => {
    const dest = await batchDestination("mapped", {
      sharedSecret: SECRET,
      mapping: `{"id": $messageId, "n": properties.i}`,
      filter: { expression: `event = "Mapped" and properties.i < 3` },
      batching: { maxCalls: 50, maxWait: durationFromMs(300) },
    });
    const ids = await sendTracks("Mapped", 5);
    await until(() => elements(rx.mapped!).length >= 3, { message: "3 mapped elements" });
    expect(
      elements(rx.mapped!)
        .map((g) => g.element)
        .sort((a, b) => Number(a.n) - Number(b.n)),
    ).toEqual([0, 1, 2].map((n) => ({ id: ids[n], n })));
    const filtered = await until(
      async () => {
        if ((await code(stack.admin.getMessage({ messageId: ids[4]! }))) !== "OK") return undefined;
        const m = await stack.admin.getMessage({ messageId: ids[4]! });
        return m.deliveries.find((d) => d.destinationId === dest.id && d.filterReason !== "");
      },
      { message: "the fifth call's timeline says filtered" },
    );
    expect(filtered.filterReason).toBe("filter: expression");

    const dry = await stack.admin.dryRunDestination({
      destination: { case: "destinationId", value: dest.id },
      callJson: JSON.stringify({
        type: "track",
        userId: "d",
        event: "Mapped",
        messageId: "dry-1",
        properties: { i: 1 },
      }),
    });
    expect(dry.requests).toHaveLength(1);
    expect(JSON.parse(dry.requests[0]!.body)).toEqual([{ id: "dry-1", n: 1 }]);
    expect(dry.requests[0]!.headers["Idempotency-Key"]).toMatch(/^batch_[0-9a-f]{32}$/);
    expect(verifySegmentRequest(dry.requests[0]!.body, dry.requests[0]!.headers, SECRET)).toBe(true);
  });

  it("refuses batching with PER_USER ordering, with placeholders, and out-of-range limits", async () => {
    const base = { name: "x", sourceIds: [src.id], urls: [rx.arrays!.url("/x")] };
    const cases = [
      { destination: { ...base, ordering: Ordering.PER_USER, batching: {} }, field: "destination.batching" },
      {
        destination: { ...base, urls: [rx.arrays!.url("/u/{{ userId }}")], batching: {} },
        field: "destination.urls[0]",
      },
      { destination: { ...base, batching: { maxCalls: 1001 } }, field: "destination.batching.max_calls" },
      { destination: { ...base, batching: { maxBytes: 100 } }, field: "destination.batching.max_bytes" },
      {
        destination: { ...base, batching: { maxWait: durationFromMs(61_000) } },
        field: "destination.batching.max_wait",
      },
    ];
    for (const c of cases) {
      const err = (await stack.admin.createDestination({ destination: c.destination }).then(
        () => undefined,
        (e: unknown) => e,
      )) as HookpostError | undefined;
      expect([c.field, err?.codeName]).toEqual([c.field, "INVALID_ARGUMENT"]);
      expect(err!.fieldViolations.map((v) => v.field)).toContain(c.field);
    }
  });
});
