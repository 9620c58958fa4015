/** How often the lag is sampled: two timer wake-ups a second, nothing measurable at idle. */
const SAMPLE_MS = 500;
/** Weight of the latest sample: a busy second shows within a few samples, one spike does not. */
const WEIGHT = 1 / 4;

/**
 * How late this replica's event loop runs its timers (moving average, ms). A busy replica adds
 * about that much to every attempt it times, whatever the destination: the direct-delivery
 * check (design §6) allows for it, so that a saturated replica, which most needs the cheaper
 * path, does not judge every destination slow and store all its deliveries instead.
 */
export class LoopLag {
  #ms = 0;
  #timer: NodeJS.Timeout | undefined;

  get ms(): number {
    return this.#ms;
  }

  start(): void {
    if (this.#timer) return;
    let expected = performance.now() + SAMPLE_MS;
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#ms += (Math.max(0, now - expected) - this.#ms) * WEIGHT;
      expected = now + SAMPLE_MS;
    }, SAMPLE_MS).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
