import type { AttemptRecord, LogRecord } from "@hookpost/core";
import { HealthAggregate, HealthTally } from "@hookpost/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

// Dispatcher replicas fold their records into per-second summaries; ingest merges summaries.
// The figures must not depend on where the windows fall: however a run of records is cut into
// summaries, merging them gives what one summary of the whole run gives.

const T0 = Date.parse("2026-11-23T12:00:00Z");
// Only merge() and figures() are used: no NATS connection is needed for the arithmetic.
const offline = () => new HealthAggregate(undefined as never, undefined as never);

function attempt(
  destinationId: string,
  messageId: string,
  atMs: number,
  o: { ok: boolean; attemptNumber?: number; nextMs?: number; reason?: string },
): AttemptRecord {
  return {
    kind: "attempt",
    messageId,
    destinationId,
    sourceId: "s",
    url: "http://127.0.0.1/hook",
    attemptNumber: o.attemptNumber ?? 1,
    startTime: new Date(atMs).toISOString(),
    durationMs: 0,
    outcome: o.ok ? "success" : "server_error",
    status: o.ok ? 200 : 500,
    reason: o.reason ?? (o.ok ? "delivered (200)" : "500 is retried"),
    retryable: !o.ok,
    responseBody: "",
    ...(o.nextMs === undefined ? {} : { nextAttemptTime: new Date(o.nextMs).toISOString() }),
  };
}

/** Folds `records` into summaries cut before each index in `cuts`, merged in order. */
function merged(records: LogRecord[], cuts: number[]): HealthAggregate {
  const health = offline();
  const tally = new HealthTally();
  let t = T0;
  const flush = () => {
    const s = tally.take("r1", t);
    if (s) health.merge(JSON.parse(JSON.stringify(s)));
  };
  records.forEach((r, i) => {
    if (cuts.includes(i)) flush();
    tally.fold(r);
    t += 100;
  });
  flush();
  return health;
}

describe("health summaries", () => {
  it("count deliveries, failures, incoming calls, the failure run and the waiting retries", () => {
    const records: LogRecord[] = [
      {
        kind: "routed",
        messageId: "m1",
        sourceId: "s",
        receivedAt: new Date(T0).toISOString(),
        time: new Date(T0).toISOString(),
        destinations: ["d", "e"],
        filtered: false,
      },
      attempt("d", "m1", T0 + 10, { ok: false, nextMs: T0 + 60_000 }),
      attempt("d", "m2", T0 + 20, { ok: false, nextMs: T0 + 30_000 }),
      attempt("d", "m3", T0 + 30, { ok: false, reason: "422 is not retried" }),
      attempt("e", "m1", T0 + 40, { ok: true }),
      attempt("d", "m2", T0 + 30_500, { ok: true, attemptNumber: 2 }),
      attempt("d", "m4", T0 + 30_600, { ok: false, nextMs: T0 + 90_000, reason: "timeout after 5000 ms" }),
    ];
    for (const cuts of [[], [1, 4], [1, 2, 3, 4, 5, 6]]) {
      const h = merged(records, cuts);
      const d = h.figures("d", T0 + 31_000);
      expect(d).toMatchObject({
        deliveries5m: 1,
        failures5m: 4,
        lastSuccessMs: T0 + 30_500,
        lastFailureMs: T0 + 30_600,
        lastFailureReason: "timeout after 5000 ms",
        // m2's success ended the run; m4 failed after it.
        consecutiveFailures: 1,
        // m1 still waits (m2 was delivered on its retry, m4 waits longer).
        nextRetryMs: T0 + 60_000,
      });
      expect(d.incomingPerSecond).toBeCloseTo(1 / 60, 6);
      expect(h.figures("e", T0 + 31_000)).toMatchObject({ deliveries5m: 1, consecutiveFailures: 0 });
    }
  });

  it("keep a waiting retry whose message id is named like an object's property", () => {
    for (const id of ["__proto__", "constructor", "toString"]) {
      const h = merged([attempt("d", id, T0, { ok: false, nextMs: T0 + 60_000 })], []);
      expect(h.figures("d", T0 + 1_000).nextRetryMs, id).toBe(T0 + 60_000);
      const done = merged(
        [
          attempt("d", id, T0, { ok: false, nextMs: T0 + 60_000 }),
          attempt("d", id, T0 + 60_000, { ok: true, attemptNumber: 2 }),
        ],
        [1],
      );
      expect(done.figures("d", T0 + 61_000).nextRetryMs, id).toBeUndefined();
    }
  });

  it("give the same figures however the records are cut into summaries", () => {
    const record = fc.record({
      dest: fc.constantFrom("a", "b"),
      message: fc.integer({ min: 0, max: 5 }),
      ok: fc.boolean(),
      retry: fc.boolean(),
      routed: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(record, { maxLength: 40 }),
        fc.uniqueArray(fc.integer({ min: 1, max: 39 })),
        (specs, cuts) => {
          // As JetStream counts them: each delivery of a message to a destination is one more.
          const tries = new Map<string, number>();
          const next = (key: string) => {
            tries.set(key, (tries.get(key) ?? 0) + 1);
            return tries.get(key)!;
          };
          const records: LogRecord[] = specs.map((x, i) =>
            x.routed
              ? {
                  kind: "routed",
                  messageId: `m${x.message}`,
                  sourceId: "s",
                  receivedAt: new Date(T0 + i * 100).toISOString(),
                  time: new Date(T0 + i * 100).toISOString(),
                  destinations: [x.dest],
                  filtered: false,
                }
              : attempt(x.dest, `m${x.message}`, T0 + i * 100, {
                  ok: x.ok,
                  attemptNumber: next(`${x.dest}/${x.message}`),
                  ...(!x.ok && x.retry ? { nextMs: T0 + 60_000 + i } : {}),
                }),
          );
          const now = T0 + specs.length * 100;
          const whole = merged(records, []);
          const cut = merged(records, cuts);
          for (const id of ["a", "b"]) expect(cut.figures(id, now)).toEqual(whole.figures(id, now));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("forget a retry long overdue instead of showing it as the next one", () => {
    const h = merged([attempt("d", "m1", T0, { ok: false, nextMs: T0 + 1000 })], []);
    expect(h.figures("d", T0 + 500).nextRetryMs).toBe(T0 + 1000);
    // Its outcome came from another replica's earlier summary: after a minute it is not shown.
    expect(h.figures("d", T0 + 1000 + 61_000).nextRetryMs).toBeUndefined();
  });
});
