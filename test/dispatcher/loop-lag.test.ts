import { LoopLag } from "@hookpost/dispatcher";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";

/** Keeps the event loop busy for `ms` (as a saturated replica does). */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {}
}

describe("event-loop lag (direct delivery's allowance for a busy replica)", () => {
  it("rises while the loop is blocked and falls back once it runs freely", async () => {
    const lag = new LoopLag();
    lag.start();
    try {
      expect(lag.ms).toBe(0);
      // Blocked for 300 ms at a time: timers run that late.
      await until(
        async () => {
          busy(300);
          await new Promise((r) => setImmediate(r));
          return lag.ms > 50;
        },
        { message: "the lag of a blocked loop shows", timeout: 10_000, interval: 1 },
      );
      await until(() => lag.ms < 10, { message: "the lag falls back on a free loop", timeout: 15_000 });
    } finally {
      lag.stop();
    }
  });
});
