import type { DestinationRecord } from "@hookpost/core";
import { RateGate } from "../rate-gate.js";

/**
 * Per destination: how many of its heads may be sent at once on this replica (max_in_flight, else
 * DELIVERY_CONCURRENCY) and how fast (rate_limit_per_second, evenly spaced by a RateGate).
 *
 * The whole limit, not a share: every user of a PER_USER destination lives in one ordered
 * partition, and a partition has one owner, so this replica is the destination's only sender
 * (two only during a hand-over, for the length of one request).
 */
export class DestinationSlots {
  readonly #concurrency: number;
  readonly #inFlight = new Map<string, number>();
  readonly #waiters = new Map<string, (() => void)[]>();
  readonly #gates = new Map<string, RateGate>();

  constructor(concurrency: number) {
    this.#concurrency = concurrency;
  }

  /**
   * Resolves with a release function once `dest` has a free slot and its rate allows a start;
   * undefined when `signal` aborted first. `current` reads the record again at each check, so a
   * changed limit applies to waiters at once.
   */
  async take(
    dest: DestinationRecord,
    current: () => DestinationRecord | undefined,
    signal: AbortSignal,
  ): Promise<(() => void) | undefined> {
    const id = dest.id;
    const cap = () => current()?.maxInFlight ?? this.#concurrency;
    while ((this.#inFlight.get(id) ?? 0) >= cap()) {
      if (signal.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          resolve();
        };
        const list = this.#waiters.get(id) ?? [];
        list.push(done);
        this.#waiters.set(id, list);
        signal.addEventListener("abort", done, { once: true });
      });
    }
    if (signal.aborted) return undefined;
    this.#inFlight.set(id, (this.#inFlight.get(id) ?? 0) + 1);
    const release = () => {
      const n = (this.#inFlight.get(id) ?? 1) - 1;
      if (n <= 0) this.#inFlight.delete(id);
      else this.#inFlight.set(id, n);
      this.#waiters.get(id)?.shift()?.();
      if (this.#waiters.get(id)?.length === 0) this.#waiters.delete(id);
    };
    if (dest.rateLimitPerSecond !== undefined) {
      const gate = this.#gates.get(id) ?? new RateGate();
      this.#gates.set(id, gate);
      if (!(await gate.take(() => current()?.rateLimitPerSecond, signal))) {
        release();
        return undefined;
      }
    }
    return release;
  }

  /** A deleted destination's gate goes (waiters are woken by their own signals). */
  forget(id: string): void {
    this.#gates.delete(id);
  }
}
