import type { NatsConnection } from "nats";

/**
 * Whether a NATS connection is up right now. nats.js reconnects forever and buffers meanwhile;
 * services use this to answer UNAVAILABLE at once and to flip /readyz while it is down.
 */
export class ConnectionState {
  readonly #nc: NatsConnection;
  #up = true;
  readonly #listeners = new Set<(up: boolean) => void>();

  constructor(nc: NatsConnection) {
    this.#nc = nc;
    void this.#watch();
  }

  get connected(): boolean {
    return this.#up && !this.#nc.isClosed();
  }

  /** Called with false when the connection drops and true when it is back. */
  onChange(fn: (up: boolean) => void): void {
    this.#listeners.add(fn);
  }

  async #watch(): Promise<void> {
    for await (const s of this.#nc.status()) {
      const up = s.type === "reconnect" ? true : s.type === "disconnect" ? false : this.#up;
      if (up === this.#up) continue;
      this.#up = up;
      for (const fn of this.#listeners) fn(up);
    }
  }
}
