import { BREAKER_STALE_MS, type BreakerReport, HealthAggregate, HealthTally } from "@hookpost/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

// Each dispatcher replica keeps its own circuit breaker per destination and reports its changes
// in its health summaries; ingest keeps each replica's latest report and shows the destination's
// breaker open while any replica holds its calls back. Only merge() and figures() are used: the
// arithmetic needs no NATS connection.

const T0 = Date.parse("2026-11-25T01:00:00Z");
const offline = () => new HealthAggregate(undefined as never, undefined as never);
const open = (until: number, failures = 5): BreakerReport => ({ state: "open", until, failures });
const closed: BreakerReport = { state: "closed", failures: 0 };

/** One replica's summary at `atMs` carrying breaker reports (through a tally, as the publisher writes). */
function summary(replica: string, atMs: number, reports: [string, BreakerReport][], leaving = false) {
  const tally = new HealthTally();
  for (const [id, r] of reports) tally.breaker(id, r);
  const s = tally.take(replica, atMs, leaving);
  // As stored and read back: JSON.
  return s && JSON.parse(JSON.stringify(s));
}

describe("breakers in health", () => {
  it("show open until the latest cool-down end while any replica's breaker is open", () => {
    const h = offline();
    h.merge(summary("r1", T0, [["d", open(T0 + 5_000)]]));
    h.merge(summary("r2", T0 + 100, [["d", open(T0 + 20_000)]]));
    h.merge(summary("r3", T0 + 200, [["d", closed]]));
    expect(h.figures("d", T0 + 1_000).breaker).toEqual({ state: "open", untilMs: T0 + 20_000, replicas: 2 });
    expect(h.figures("other", T0 + 1_000).breaker).toEqual({ state: "closed", replicas: 0 });

    // r2's probe succeeded: r1 still holds calls back.
    h.merge(summary("r2", T0 + 300, [["d", closed]]));
    expect(h.figures("d", T0 + 1_000).breaker).toEqual({ state: "open", untilMs: T0 + 5_000, replicas: 1 });
    // r1's cool-down is over: its next call probes.
    expect(h.figures("d", T0 + 6_000).breaker).toEqual({ state: "half_open", replicas: 1 });
    h.merge(summary("r1", T0 + 6_500, [["d", { state: "half_open", until: T0 + 5_000, failures: 5 }]]));
    expect(h.figures("d", T0 + 7_000).breaker).toEqual({ state: "half_open", replicas: 1 });
    h.merge(summary("r1", T0 + 7_500, [["d", closed]]));
    expect(h.figures("d", T0 + 8_000).breaker).toEqual({ state: "closed", replicas: 0 });
  });

  it("keep the latest report of a window", () => {
    const tally = new HealthTally();
    tally.breaker("d", open(T0 + 5_000));
    tally.breaker("d", closed);
    const h = offline();
    h.merge(JSON.parse(JSON.stringify(tally.take("r1", T0))));
    expect(h.figures("d", T0 + 1_000).breaker.state).toBe("closed");
  });

  it("drop the reports of a replica that left, at once", () => {
    const h = offline();
    h.merge(summary("r1", T0, [["d", open(T0 + 60_000)]]));
    h.merge(summary("r2", T0, [["e", open(T0 + 60_000)]]));
    expect(h.figures("d", T0 + 1_000).breaker.state).toBe("open");
    // Shutting down: an empty window that says so.
    h.merge(summary("r1", T0 + 2_000, [], true));
    expect(h.figures("d", T0 + 3_000).breaker).toEqual({ state: "closed", replicas: 0 });
    expect(h.figures("e", T0 + 3_000).breaker.state).toBe("open");
  });

  it("drop reports not refreshed for minutes once their cool-down is over (a replica killed)", () => {
    const h = offline();
    h.merge(summary("gone", T0, [["d", open(T0 + 5_000)]]));
    h.merge(summary("slow", T0, [["e", open(T0 + BREAKER_STALE_MS + 60_000)]]));
    // Old, cool-down over: the replica would have said more by now.
    expect(h.figures("d", T0 + BREAKER_STALE_MS - 1_000).breaker.state).toBe("half_open");
    expect(h.figures("d", T0 + BREAKER_STALE_MS + 1).breaker).toEqual({ state: "closed", replicas: 0 });
    // Old but still cooling down: shown as open until its end, then dropped.
    expect(h.figures("e", T0 + BREAKER_STALE_MS + 1).breaker.state).toBe("open");
    expect(h.figures("e", T0 + BREAKER_STALE_MS + 60_001).breaker.state).toBe("closed");
    // A refreshed report stays, however long the breaker has been open.
    h.merge(summary("live", T0, [["f", open(T0 + 5_000)]]));
    for (let t = T0 + 60_000; t <= T0 + 10 * 60_000; t += 60_000) {
      h.merge(summary("live", t, [["f", open(T0 + 5_000)]]));
      expect(h.figures("f", t + 30_000).breaker.state).toBe("half_open");
    }
  });

  it("forget a deleted destination's breaker", () => {
    const h = offline();
    h.merge(summary("r1", T0, [["d", open(T0 + 60_000)]]));
    h.forget("d");
    expect(h.figures("d", T0 + 1_000).breaker.state).toBe("closed");
  });

  it("derive the same breaker however the replicas' reports are cut into summaries and interleaved", () => {
    const change = fc.record({
      replica: fc.constantFrom("r1", "r2", "r3"),
      dest: fc.constantFrom("a", "b"),
      state: fc.constantFrom("closed", "open", "half_open"),
      untilIn: fc.integer({ min: -10_000, max: 10_000 }),
    });
    fc.assert(
      fc.property(
        fc.array(change, { maxLength: 30 }),
        fc.array(fc.boolean(), { minLength: 30, maxLength: 30 }),
        fc.array(fc.constantFrom("r1", "r2", "r3"), { maxLength: 40 }),
        fc.integer({ min: 0, max: 20_000 }),
        (changes, cutAfter, order, nowIn) => {
          const now = T0 + nowIn;
          // Each replica's summaries, in its order; a cut closes a window.
          const summaries = new Map<string, object[]>();
          const tallies = new Map<string, HealthTally>();
          changes.forEach((c, i) => {
            const tally = tallies.get(c.replica) ?? new HealthTally();
            tallies.set(c.replica, tally);
            const report: BreakerReport =
              c.state === "closed"
                ? closed
                : { state: c.state as "open" | "half_open", until: T0 + c.untilIn, failures: 5 };
            tally.breaker(c.dest, report);
            if (cutAfter[i]) {
              const list = summaries.get(c.replica) ?? [];
              list.push(JSON.parse(JSON.stringify(tally.take(c.replica, T0 + i))));
              summaries.set(c.replica, list);
            }
          });
          for (const [replica, tally] of tallies) {
            const last = tally.take(replica, T0 + changes.length);
            if (last)
              summaries.set(replica, [...(summaries.get(replica) ?? []), JSON.parse(JSON.stringify(last))]);
          }
          // Merged in any interleaving that keeps each replica's order (the stream keeps it).
          const h = offline();
          const queues = new Map([...summaries].map(([r, l]) => [r, [...l]]));
          for (const r of order) {
            const s = queues.get(r)?.shift();
            if (s) h.merge(s as never);
          }
          for (const l of queues.values()) for (const s of l) h.merge(s as never);

          // The model: each replica's last report per destination.
          for (const dest of ["a", "b"]) {
            const latest = new Map<string, (typeof changes)[number]>();
            for (const c of changes) if (c.dest === dest) latest.set(c.replica, c);
            const notClosed = [...latest.values()].filter((c) => c.state !== "closed");
            const cooling = notClosed.filter((c) => c.state === "open" && T0 + c.untilIn > now);
            const want =
              cooling.length > 0
                ? {
                    state: "open",
                    untilMs: Math.max(...cooling.map((c) => T0 + c.untilIn)),
                    replicas: notClosed.length,
                  }
                : { state: notClosed.length > 0 ? "half_open" : "closed", replicas: notClosed.length };
            expect(h.figures(dest, now).breaker).toEqual(want);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
