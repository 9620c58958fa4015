import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Analytics, AnalyticsError, debugEnabled } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { describe, expect, it } from "vitest";
import { useFakeIngest } from "./fake-ingest.js";

const ingest = useFakeIngest();

function expectCode(fn: () => unknown, code: string): AnalyticsError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AnalyticsError);
    expect((err as AnalyticsError).code).toBe(code);
    return err as AnalyticsError;
  }
  throw new Error("the call was accepted");
}

describe("queue bound and close", () => {
  it("refuses a call beyond maxQueueSize with queue_full, and accepts again once there is room", async () => {
    const a = new Analytics(ingest.writeKey, { endpoint: ingest.target, flushAt: 100, maxQueueSize: 3 });
    for (let i = 0; i < 3; i++) a.track({ userId: "u", event: `E${i}` });
    const err = expectCode(() => a.track({ userId: "u", event: "E3" }), "queue_full");
    expect(err.message).toMatch(/maxQueueSize/);
    expect(a.queued).toBe(3);
    await a.flush();
    a.track({ userId: "u", event: "E4" });
    await a.close();
    expect(ingest.storedNow.map((s) => (s.value as { event: string }).event)).toEqual([
      "E0",
      "E1",
      "E2",
      "E4",
    ]);
  });

  it("throws for calls after close(); close() is idempotent and delivers what was queued", async () => {
    const a = new Analytics(ingest.writeKey, { endpoint: ingest.target, flushAt: 100, flushAfter: 60_000 });
    a.group({ userId: "u", groupId: "g" });
    const first = a.close();
    expect(a.closed).toBe(true);
    expect(a.close()).toBe(first);
    expectCode(() => a.track({ userId: "u", event: "Late" }), "closed");
    expectCode(() => a.identify({ userId: "u" }), "closed");
    await first;
    expect(ingest.storedNow).toHaveLength(1);
    await a.flush(); // nothing left: resolves
  });

  it("checks option values", () => {
    expect(() => new Analytics("")).toThrow(TypeError);
    const a = new Analytics("wk", { endpoint: ingest.target });
    expect(a.endpoint).toBe(ingest.target);
    expect([a.flushAt, a.size, a.flushAfter]).toEqual([20, 20, 5000]);
    expect(() => {
      a.flushAt = 0;
    }).toThrow(RangeError);
    expect(() => {
      a.flushAfter = -1;
    }).toThrow(RangeError);
    expect(() => new Analytics("wk", { maxQueueSize: 1.5 })).toThrow(RangeError);
    void a.close();
  });

  it("refuses delays a timer cannot hold, which Node would run after 1 ms", () => {
    // Node clamps setTimeout delays of 2^31 ms or more (and Infinity) to 1 ms: flushAfter would
    // flush at once, and close({ timeoutMs: Infinity }) would give up on everything at once.
    for (const ms of [Number.POSITIVE_INFINITY, 2 ** 31]) {
      expect(() => new Analytics("wk", { flushAfter: ms })).toThrow(RangeError);
      expect(() => new Analytics("wk", { retryMaxDelayMs: ms })).toThrow(RangeError);
      const a = new Analytics("wk", { endpoint: ingest.target });
      expect(() => {
        a.flushAfter = ms;
      }).toThrow(RangeError);
      expect(() => a.close({ timeoutMs: ms })).toThrow(/at most 2147483647/);
      expect(a.closed).toBe(false);
      void a.close();
    }
    const a = new Analytics("wk", { endpoint: ingest.target, flushAfter: 2 ** 31 - 1 });
    expect(a.flushAfter).toBe(2 ** 31 - 1);
    void a.close();
  });

  it("defaults the endpoint to HOOKPOST_ENDPOINT, else 127.0.0.1:50051", () => {
    const saved = process.env.HOOKPOST_ENDPOINT;
    try {
      delete process.env.HOOKPOST_ENDPOINT;
      expect(new Analytics("wk").endpoint).toBe("127.0.0.1:50051");
      process.env.HOOKPOST_ENDPOINT = "ingest.internal:7000";
      expect(new Analytics("wk").endpoint).toBe("ingest.internal:7000");
    } finally {
      if (saved === undefined) delete process.env.HOOKPOST_ENDPOINT;
      else process.env.HOOKPOST_ENDPOINT = saved;
    }
  });
});

describe("in a real process", () => {
  const fixture = fileURLToPath(new URL("./fixtures/client-process.ts", import.meta.url));

  function run(env: Record<string, string>, timeoutMs = 20_000) {
    return new Promise<{ code: number | null; stdout: string; stderr: string; ms: number }>((resolve) => {
      const started = Date.now();
      execFile(
        process.execPath,
        ["--conditions=@hookpost/source", "--import", "tsx", fixture],
        { env: { ...process.env, DEBUG: "", ...env }, timeout: timeoutMs },
        (err, stdout, stderr) => {
          const code = err ? ((err as { code?: number }).code ?? null) : 0;
          resolve({ code: typeof code === "number" ? code : null, stdout, stderr, ms: Date.now() - started });
        },
      );
    });
  }

  it("sends what is queued before an idle process exits (beforeExit); its timers do not hold it", async () => {
    const r = await run({ SCENARIO: "idle", HOOKPOST_ENDPOINT: ingest.target, WRITE_KEY: ingest.writeKey });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(15_000); // flushAfter is 60 s
    expect(ingest.storedNow.map((s) => (s.value as { event: string }).event)).toEqual(["Idle"]);
  });

  it("reports what it could not send before an idle process exits, never drops it silently", async () => {
    const r = await run({ SCENARIO: "idle", HOOKPOST_ENDPOINT: ingest.target, MAX_RETRIES: "0" });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/hookpost analytics: 1 call\(s\) not stored .*UNAUTHENTICATED/);
  });

  it.each(["flush", "close"])(
    "stays alive through retries while %s() is awaited, and delivers",
    async (scenario) => {
      ingest.failNext(2, Code.UNAVAILABLE);
      const r = await run({
        SCENARIO: scenario,
        HOOKPOST_ENDPOINT: ingest.target,
        WRITE_KEY: ingest.writeKey,
      });
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0); // 13 would mean: exited with the await unsettled
      expect(r.stdout).toBe(scenario === "flush" ? "flushed\n" : "closed\n");
      expect(ingest.attempts).toBe(3);
      expect(ingest.storedNow).toHaveLength(3);
    },
  );

  it("writes failures to stderr when nobody listens for 'error'", async () => {
    const r = await run({
      SCENARIO: "fail-without-listener",
      HOOKPOST_ENDPOINT: ingest.target,
      MAX_RETRIES: "0",
    });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/hookpost analytics: 1 call\(s\) not stored .*UNAUTHENTICATED/);
  });

  it("logs to stderr with DEBUG=analytics, and only then", async () => {
    const env = { SCENARIO: "close", HOOKPOST_ENDPOINT: ingest.target, WRITE_KEY: ingest.writeKey };
    const on = await run({ ...env, DEBUG: "nats,analytics" });
    expect(on.code).toBe(0);
    expect(on.stderr).toMatch(/analytics client for 127\.0\.0\.1:\d+/);
    expect(on.stderr).toMatch(/analytics batch of 3 calls stored/);
    expect(on.stderr).not.toContain(ingest.writeKey);
    const off = await run({ ...env, DEBUG: "" });
    expect(off.stderr).toBe("");
  });

  it("matches DEBUG like the debug package", () => {
    expect(debugEnabled("analytics", "analytics")).toBe(true);
    expect(debugEnabled("analytics", "foo, analytics")).toBe(true);
    expect(debugEnabled("analytics", "*")).toBe(true);
    expect(debugEnabled("analytics", "ana*")).toBe(true);
    expect(debugEnabled("analytics", "*,-analytics")).toBe(false);
    expect(debugEnabled("analytics", "analytics-extra")).toBe(false);
    expect(debugEnabled("analytics", undefined)).toBe(false);
  });
});
