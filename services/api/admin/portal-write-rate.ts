import { Code, HookpostError, PORTAL_LINK_WRITE_RATE } from "@hookpost/contract";

/** Links whose bucket is tracked at once; beyond it, full (idle) buckets are forgotten first. */
const MAX_TRACKED = 10_000;

/**
 * A token bucket per portal link in this replica: at most PORTAL_LINK_WRITE_RATE writes, refused
 * ones included (each leaves audit records). Over it: RESOURCE_EXHAUSTED with the wait, and
 * nothing recorded.
 */
export class PortalWriteRate {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #perMs: number;
  readonly #burst: number;
  readonly #now: () => number;

  constructor(rate: { perMinute: number; burst: number } = PORTAL_LINK_WRITE_RATE, now = () => Date.now()) {
    this.#perMs = rate.perMinute / 60_000;
    this.#burst = rate.burst;
    this.#now = now;
  }

  take(linkId: string): void {
    const now = this.#now();
    const b = this.#buckets.get(linkId) ?? { tokens: this.#burst, at: now };
    b.tokens = Math.min(this.#burst, b.tokens + (now - b.at) * this.#perMs);
    b.at = now;
    if (b.tokens < 1) {
      const waitMs = Math.ceil((1 - b.tokens) / this.#perMs);
      throw new HookpostError(
        Code.RESOURCE_EXHAUSTED,
        `this portal link makes more than ${this.#burst} changes at once or ${this.#perMs * 60_000} a minute: nothing was changed; retry in ${Math.ceil(waitMs / 1000)} s`,
        [],
        { retryAfterMs: waitMs },
      );
    }
    b.tokens -= 1;
    if (!this.#buckets.has(linkId) && this.#buckets.size >= MAX_TRACKED) this.#forgetFull(now);
    this.#buckets.set(linkId, b);
  }

  /** Buckets that have refilled hold nothing worth keeping. */
  #forgetFull(now: number): void {
    for (const [id, b] of this.#buckets) {
      if (b.tokens + (now - b.at) * this.#perMs >= this.#burst) this.#buckets.delete(id);
    }
  }
}
