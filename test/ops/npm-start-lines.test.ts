import { deliveredCounts, deliveredLine, duration, humanLine } from "@hookpost/local";
import { describe, expect, it } from "vitest";

// What `npm start` makes of the services' log records (the process test: npm-start.test.ts).

describe("npm start's lines for people", () => {
  it("one line per failed attempt: destination, URL, answer, attempt, next try, start of the body", () => {
    expect(
      humanLine("dispatcher", {
        level: 30,
        msg: "delivery retry scheduled",
        destinationId: "dest-1",
        url: "https://crm.example.com/hooks",
        status: 500,
        error: "http",
        attempt: 3,
        delayMs: 8000,
        response: `{"error":\n"${"x".repeat(300)}"}`,
      }),
    ).toBe(
      `✗ dest-1 https://crm.example.com/hooks 500 (attempt 3, next in 8 s): {"error": "${"x".repeat(189)}`,
    );
    expect(
      humanLine("dispatcher", {
        level: 30,
        msg: "delivery retry scheduled",
        destinationId: "d",
        url: "https://a/x",
        status: 0,
        error: "timeout",
        detail: "no answer within 5000 ms",
        attempt: 1,
        delayMs: 900,
      }),
    ).toBe("✗ d https://a/x timeout (attempt 1, next in 900 ms): no answer within 5000 ms");
    expect(
      humanLine("dispatcher", {
        level: 40,
        msg: "delivery dead-lettered",
        destinationId: "d",
        url: "https://a/x",
        status: 422,
        attempts: 1,
        reason: "422 is not retried",
      }),
    ).toBe("✗ d https://a/x 422 (attempt 1, dead letter: 422 is not retried)");
  });

  it("per-URL records and info lines stay hidden; warnings are readable, not JSON", () => {
    expect(humanLine("dispatcher", { level: 40, msg: "webhook timed out", url: "x" })).toBeUndefined();
    expect(humanLine("ingest", { level: 30, msg: "ingest listening" })).toBeUndefined();
    expect(
      humanLine("ingest", {
        level: 40,
        time: "t",
        pid: 1,
        service: "ingest",
        msg: "EVENTS stream is full",
        err: "x",
      }),
    ).toBe("[ingest] warn: EVENTS stream is full (err=x)");
    expect(humanLine("dispatcher", { level: 50, msg: "boom" })).toBe("[dispatcher] error: boom");
  });

  it("durations", () => {
    expect([duration(250), duration(8000), duration(15 * 60_000)]).toEqual(["250 ms", "8 s", "15 min"]);
  });

  it("summarises deliveries from the dispatcher's counter, per destination when labelled", () => {
    const before = deliveredCounts(
      'hookpost_dispatcher_deliveries_total{outcome="delivered",destination="a"} 2\n' +
        'hookpost_dispatcher_deliveries_total{outcome="retry",destination="a"} 5\n',
    );
    const now = deliveredCounts(
      "# HELP x\n" +
        'hookpost_dispatcher_deliveries_total{outcome="delivered",destination="a"} 5\n' +
        'hookpost_dispatcher_deliveries_total{outcome="delivered",destination="b"} 1\n',
    );
    expect(deliveredLine(before, now, 5)).toBe("✓ 4 delivered in the last 5 s (a: 3, b: 1)");
    expect(deliveredLine(now, now, 5)).toBeUndefined();
    const unlabelled = deliveredCounts('hookpost_dispatcher_deliveries_total{outcome="delivered"} 7\n');
    expect(deliveredLine(new Map(), unlabelled, 5)).toBe("✓ 7 delivered in the last 5 s");
  });
});
