/**
 * Runs asynchronous writes with at most `max` in flight, for a single producer that must not
 * run ahead of the server. The first failure is kept: later `run` calls and `drain` throw it.
 */
export class PublishWindow {
  readonly #max: number;
  #inFlight = 0;
  #waiter: (() => void) | undefined;
  #failed = false;
  #error: unknown;

  constructor(max: number) {
    if (!(max >= 1)) throw new Error("window size must be at least 1");
    this.#max = max;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get failed(): boolean {
    return this.#failed;
  }

  /**
   * Starts `task` once a slot is free. Returns undefined when it could start at once (no
   * promise allocated on the fast path), otherwise a promise that resolves once it started.
   */
  run(task: () => Promise<unknown>): Promise<void> | undefined {
    if (this.#failed) throw this.#error;
    if (this.#inFlight < this.#max) {
      this.#start(task);
      return undefined;
    }
    return this.#runLater(task);
  }

  async #runLater(task: () => Promise<unknown>): Promise<void> {
    while (this.#inFlight >= this.#max) {
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
      if (this.#failed) throw this.#error;
    }
    this.#start(task);
  }

  #start(task: () => Promise<unknown>): void {
    this.#inFlight++;
    let p: Promise<unknown>;
    try {
      p = task();
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      () => this.#settled(),
      (err) => {
        if (!this.#failed) {
          this.#failed = true;
          this.#error = err;
        }
        this.#settled();
      },
    );
  }

  #settled(): void {
    this.#inFlight--;
    const w = this.#waiter;
    this.#waiter = undefined;
    w?.();
  }

  /** Waits until nothing is in flight; throws the first failure, if any. */
  async drain(): Promise<void> {
    while (this.#inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
    if (this.#failed) throw this.#error;
  }

  /** Waits until nothing is in flight, ignoring failures (cleanup after an error). */
  async settle(): Promise<void> {
    while (this.#inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
  }
}
