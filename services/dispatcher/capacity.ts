import { getOrInsert } from "@hookpost/core";
import { waitTurn } from "./wait-turn.js";

/**
 * Requests in flight on one replica (docs/design/delivery-at-scale.md §3):
 * - a global cap (DELIVERY_MAX_CONNECTIONS) over every destination, of which a quarter is kept
 *   for destinations whose last attempt was answered, so hung endpoints can never take every slot;
 * - per destination, its share of `max_in_flight` (else DELIVERY_CONCURRENCY), lowered by slow
 *   start: a destination not known to answer starts at 1 request and doubles on each answer; a
 *   timeout or connection failure drops it back to 1. 1 000 hung endpoints hold 1 000 requests at
 *   most, never 16 000, and the cap bounds even that.
 * Only destinations that were attempted have an entry (a few numbers): idle costs nothing.
 */
export interface Slot {
  /** Gives the slot back; call once, when the attempt is over. */
  release(): void;
}

interface DestState {
  inFlight: number;
  /** Slow-start window: at most this many in flight, whatever the limit says. */
  window: number;
  /** The last attempt was answered (any status): its deliveries may use the reserve. */
  answering: boolean;
  /** The last attempt timed out or could not connect: fresh deliveries do not wait for it. */
  stalled: boolean;
  /** Moving average of answered attempts' durations (ms); NaN until one was answered. */
  latencyMs: number;
  /** Callers waiting for a slot of this destination, first come first served. */
  waiters: (() => void)[];
}

export class Capacity {
  readonly #max: number;
  readonly #unprovenMax: number;
  readonly #dests = new Map<string, DestState>();
  /** Callers waiting for the global cap (any destination). */
  #globalWaiters: (() => void)[] = [];
  #total = 0;
  #unproven = 0;

  constructor(maxConnections: number) {
    this.#max = maxConnections;
    this.#unprovenMax = maxConnections - Math.max(1, Math.floor(maxConnections / 4));
  }

  /** DELIVERY_MAX_CONNECTIONS. */
  get max(): number {
    return this.#max;
  }

  /** Requests in flight now, all destinations. */
  get inFlight(): number {
    return this.#total;
  }

  /** Whether the destination's last attempt was answered (its deliveries may use the reserve). */
  answering(id: string): boolean {
    return this.#dests.get(id)?.answering ?? false;
  }

  /** Whether the destination's last attempt timed out or could not connect. */
  stalled(id: string): boolean {
    return this.#dests.get(id)?.stalled ?? false;
  }

  /** Whether the destination answers, and its recent answers took at most `maxMs` on average. */
  fast(id: string, maxMs: number): boolean {
    const s = this.#dests.get(id);
    return s?.answering === true && s.latencyMs <= maxMs;
  }

  /** How many requests this destination may have in flight now: its limit, lowered by slow start. */
  window(id: string, limit: number): number {
    const s = this.#dests.get(id);
    return Math.min(limit, s ? s.window : 1);
  }

  /** A slot now, or undefined. `limit` is the destination's in-flight limit on this replica. */
  tryAcquire(id: string, limit: number): Slot | undefined {
    const s = this.#state(id);
    if (s.inFlight >= Math.min(limit, s.window)) return undefined;
    if (this.#total >= this.#max) return undefined;
    const unproven = !s.answering;
    if (unproven && this.#unproven >= this.#unprovenMax) return undefined;
    s.inFlight++;
    this.#total++;
    if (unproven) this.#unproven++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        s.inFlight--;
        this.#total--;
        if (unproven) this.#unproven--;
        this.#wake(s);
      },
    };
  }

  /**
   * A slot, waiting at most `maxWaitMs` (or until `signal` aborts); undefined when none came.
   * `limit()` is read at each try, so a changed share applies to waiting callers too.
   */
  async acquire(
    id: string,
    limit: () => number,
    signal: AbortSignal,
    maxWaitMs: number,
  ): Promise<Slot | undefined> {
    const deadline = performance.now() + maxWaitMs;
    for (;;) {
      const slot = this.tryAcquire(id, limit());
      if (slot) return slot;
      const left = deadline - performance.now();
      if (signal.aborted || left <= 0) return undefined;
      const s = this.#state(id);
      // Blocked by the destination's own window, or by the global cap: wait on the right queue.
      const own = s.inFlight >= Math.min(limit(), s.window);
      // A share of 0 (limit 0) changes only with the replica set: look again now and then.
      await waitTurn(
        own ? s.waiters : this.#globalWaiters,
        limit() === 0 ? Math.min(left, 250) : left,
        signal,
      );
    }
  }

  /** The endpoint answered after `ms`: full speed comes back by doubling. */
  answered(id: string, ms: number): void {
    const s = this.#state(id);
    // A few answers decide (weight 1/4): one slow answer does not, a turn to slow soon does.
    s.latencyMs = Number.isNaN(s.latencyMs) ? ms : s.latencyMs + (ms - s.latencyMs) / 4;
    s.answering = true;
    s.stalled = false;
    s.window = Math.min(s.window * 2, 1 << 20);
    this.#wake(s);
  }

  /** A timeout or a failed connection: back to one request at a time. */
  stall(id: string): void {
    const s = this.#state(id);
    s.answering = false;
    s.stalled = true;
    s.window = 1;
  }

  /** The destination is gone. */
  forget(id: string): void {
    const s = this.#dests.get(id);
    if (s && s.inFlight === 0) this.#dests.delete(id);
  }

  #state(id: string): DestState {
    return getOrInsert(this.#dests, id, () => ({
      inFlight: 0,
      window: 1,
      answering: false,
      stalled: false,
      latencyMs: Number.NaN,
      waiters: [],
    }));
  }

  #wake(s: DestState): void {
    s.waiters.shift()?.();
    this.#globalWaiters.shift()?.();
  }
}
