import type { Logger } from "@hookpost/core";

/**
 * A task run every `intervalMs` in the background, one run at a time: the next is planned when
 * one ends, a failed one is logged (`failed` says what failed) and the next comes as planned.
 * stop() plans no more and waits for the run under way.
 */
export class Periodic {
  readonly #run: () => Promise<unknown>;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  readonly #failed: string;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(run: () => Promise<unknown>, intervalMs: number, logger: Logger, failed: string) {
    this.#run = run;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
    this.#failed = failed;
  }

  /** The first run after `firstRunMs`, then every intervalMs. */
  start(firstRunMs = this.#intervalMs): void {
    const tick = () => {
      this.#running = this.#run()
        .then(() => {})
        .catch((err) => this.#logger.warn({ err: (err as Error).message }, this.#failed))
        .finally(() => {
          this.#running = undefined;
          if (this.#timer) this.#timer = setTimeout(tick, this.#intervalMs).unref();
        });
    };
    this.#timer = setTimeout(tick, firstRunMs).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
