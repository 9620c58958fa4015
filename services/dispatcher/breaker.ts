/** First cool-down of an opened breaker; it doubles on each failed probe, up to MAX_COOL_DOWN_MS. */
const FIRST_COOL_DOWN_MS = 5_000;
const MAX_COOL_DOWN_MS = 5 * 60_000;

export interface BreakerSettings {
  /** Consecutive failures that open a breaker (BREAKER_FAILURES). */
  threshold: number;
  /** Longest cool-down; never more than the longest retry delay (RETRY_MAX_DELAY). */
  maxCoolDownMs?: number;
  /**
   * The clock cool-downs run on (ms): monotonic by default. A cool-down is a duration measured
   * here alone; on the wall clock, one that jumped back an hour held an open breaker (and its
   * destination's calls) for that hour.
   */
  now?: () => number;
}

export type BreakerState = "closed" | "open" | "half_open";

/** What a destination's breaker says now (GetDestinationHealth, the console, the CLI). */
export interface BreakerView {
  state: BreakerState;
  /** Open: when the next probe may go (ms since the epoch). */
  until?: number;
  /** Consecutive failed attempts seen by this replica. */
  failures: number;
}

interface Entry {
  failures: number;
  /** Open until this time (ms, on the breakers' own clock); 0 while closed. */
  openUntil: number;
  coolDownMs: number;
  probing: boolean;
  /** What the last failure was ("500 is retried"). */
  last: string;
}

/**
 * Per-destination circuit breakers of one replica (docs/design/delivery-at-scale.md §3). After
 * `threshold` consecutive timeouts or retryable failures a breaker opens: the destination's calls
 * wait in its lane (storage), not in shared in-flight capacity. Once the cool-down is over one
 * probe may go (half-open); its success closes the breaker, its failure opens it again for twice
 * as long. State is per replica: each learns on its own, which is safe, since a breaker only ever
 * holds calls back. Only destinations that failed have an entry: idle costs nothing.
 */
export class Breakers {
  readonly #threshold: number;
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  readonly #maxCoolDownMs: number;
  readonly #firstCoolDownMs: number;
  /** Told when a breaker opens or closes (lanes stop or start pulling). */
  onChange: ((id: string, state: BreakerState) => void) | undefined;

  constructor(s: BreakerSettings) {
    this.#threshold = s.threshold;
    this.#now = s.now ?? (() => performance.now());
    this.#maxCoolDownMs = Math.min(MAX_COOL_DOWN_MS, s.maxCoolDownMs ?? MAX_COOL_DOWN_MS);
    this.#firstCoolDownMs = Math.min(FIRST_COOL_DOWN_MS, this.#maxCoolDownMs);
  }

  /** May an attempt go to this destination now? Half-open: true once, for the probe. */
  allow(id: string): boolean {
    const e = this.#entries.get(id);
    if (!e || e.openUntil === 0) return true;
    if (this.#now() < e.openUntil || e.probing) return false;
    e.probing = true;
    return true;
  }

  /** Open (or half-open with its probe out): fresh calls are parked at once. */
  isOpen(id: string): boolean {
    const e = this.#entries.get(id);
    return !!e && e.openUntil !== 0;
  }

  /** How long (ms) until an open breaker lets its probe go, 0 once it may; undefined when closed. */
  openForMs(id: string): number | undefined {
    const e = this.#entries.get(id);
    return e && e.openUntil !== 0 ? Math.max(0, e.openUntil - this.#now()) : undefined;
  }

  succeeded(id: string): void {
    const e = this.#entries.get(id);
    if (!e) return;
    this.#entries.delete(id);
    if (e.openUntil !== 0) this.onChange?.(id, "closed");
  }

  /** A timeout or retryable failure (not one cut short by shutdown); `reason` as a person reads it. */
  failed(id: string, reason: string): void {
    let e = this.#entries.get(id);
    if (!e) {
      e = { failures: 0, openUntil: 0, coolDownMs: this.#firstCoolDownMs, probing: false, last: "" };
      this.#entries.set(id, e);
    }
    e.failures++;
    e.last = reason;
    if (e.openUntil !== 0) {
      // The probe (or a call that was already out) failed: open again, for longer.
      if (e.probing) e.coolDownMs = Math.min(this.#maxCoolDownMs, e.coolDownMs * 2);
      e.probing = false;
      e.openUntil = this.#now() + e.coolDownMs;
      // Open again, until later: the lane waits longer, health shows the new time.
      this.onChange?.(id, "open");
      return;
    }
    if (e.failures >= this.#threshold) {
      e.openUntil = this.#now() + e.coolDownMs;
      this.onChange?.(id, "open");
    }
  }

  /** A probe that ended without telling anything (shutdown, hand-back): another may go. */
  released(id: string): void {
    const e = this.#entries.get(id);
    if (e) e.probing = false;
  }

  /**
   * The destination is gone. An open breaker closes with it, and says so as any closing does: the
   * attempt log re-reports open breakers every minute, and one forgotten silently was reported open
   * for as long as the replica ran (a destination created again with that id showed it).
   */
  forget(id: string): void {
    const e = this.#entries.get(id);
    this.#entries.delete(id);
    if (e && e.openUntil !== 0) this.onChange?.(id, "closed");
  }

  /** What the destination's last failure was, while its breaker has an entry. */
  lastFailure(id: string): string | undefined {
    return this.#entries.get(id)?.last;
  }

  view(id: string): BreakerView {
    const e = this.#entries.get(id);
    if (!e) return { state: "closed", failures: 0 };
    if (e.openUntil === 0) return { state: "closed", failures: e.failures };
    const leftMs = e.openUntil - this.#now();
    const state = e.probing || leftMs <= 0 ? "half_open" : "open";
    // Shown (and reported to health) as a time of day.
    return { state, until: Date.now() + Math.max(0, leftMs), failures: e.failures };
  }

  /** Destinations whose breaker is not closed, for health summaries. */
  notClosed(): [string, BreakerView][] {
    const out: [string, BreakerView][] = [];
    for (const [id, e] of this.#entries) if (e.openUntil !== 0) out.push([id, this.view(id)]);
    return out;
  }
}
