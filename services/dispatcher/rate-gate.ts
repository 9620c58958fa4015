import { setTimeout as sleep } from "node:timers/promises";

/** While this replica's share of a limit is 0, how often to look again. */
const IDLE_POLL_MS = 250;

/**
 * Paces one destination's deliveries on one replica: at most `rate` per second, evenly spaced
 * (no burst), so over any window of T seconds at most rate*T + 1 start. Callers wait in order
 * (FIFO). Spacing is checked against the last actual start when a waiter wakes, never reserved
 * ahead: a stalled event loop cannot release a burst of overdue slots. The rate is read at each
 * check, so a changed share (replicas joining or leaving, a new limit) applies at once.
 */
export class RateGate {
  #last = Number.NEGATIVE_INFINITY;
  #tail: Promise<void> = Promise.resolve();

  /**
   * Resolves when the caller may start; false when `signal` aborted first. `rate()` undefined:
   * no limit; 0: this replica may not deliver now (its share is 0), wait until that changes.
   */
  async take(rate: () => number | undefined, signal: AbortSignal): Promise<boolean> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise((resolve) => {
      release = resolve;
    });
    try {
      await previous;
      for (;;) {
        if (signal.aborted) return false;
        const r = rate();
        if (r === undefined) return true;
        const wait = r > 0 ? this.#last + 1000 / r - performance.now() : IDLE_POLL_MS;
        if (r > 0 && wait <= 0) {
          this.#last = performance.now();
          return true;
        }
        await sleep(Math.max(1, wait), undefined, { signal }).catch(() => {});
      }
    } finally {
      release();
    }
  }
}
