import { setTimeout as sleep } from "node:timers/promises";

/** While this replica's share of a limit is 0, how often to look again. */
const IDLE_POLL_MS = 250;

/**
 * Paces one destination's deliveries on one replica: at most `rate` per second, evenly spaced
 * (no burst), so over any window of T seconds at most rate*T + 1 start. The rate is read at each
 * call, so a changed share (replicas joining or leaving, a new limit) applies at once.
 */
export class RateGate {
  #next = 0;

  /**
   * Resolves when the caller may start; false when `signal` aborted first. `rate()` of 0 means
   * this replica may not deliver now (its share is 0): wait until that changes.
   */
  async take(rate: () => number | undefined, signal: AbortSignal): Promise<boolean> {
    for (;;) {
      if (signal.aborted) return false;
      const r = rate();
      if (r === undefined) return true;
      if (r > 0) break;
      await sleep(IDLE_POLL_MS, undefined, { signal }).catch(() => {});
    }
    const interval = 1000 / rate()!;
    const now = performance.now();
    const slot = Math.max(now, this.#next);
    this.#next = slot + interval;
    if (slot > now) await sleep(slot - now, undefined, { signal }).catch(() => {});
    return !signal.aborted;
  }
}
