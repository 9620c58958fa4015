import type { NatsConnection } from "nats";

/**
 * Whether a NATS connection is up right now. nats.js reconnects forever and buffers meanwhile;
 * services use this to answer UNAVAILABLE at once and to flip /readyz while it is down.
 */
export class ConnectionState {
  readonly #nc: NatsConnection;
  #up = true;
  #clustered = false;
  readonly #listeners = new Set<(up: boolean) => void>();

  constructor(nc: NatsConnection) {
    this.#nc = nc;
    this.#refreshClustered();
    void this.#watch();
  }

  get connected(): boolean {
    return this.#up && !this.#nc.isClosed();
  }

  /**
   * Whether losing the connection is likely to be brief: the server is a cluster member
   * (other members are known), so the client moves to another one within a second or so.
   */
  get clustered(): boolean {
    this.#refreshClustered();
    return this.#clustered;
  }

  /** The client forgets the server's INFO while reconnecting: remember the last one seen. */
  #refreshClustered(): void {
    const info = this.#nc.info;
    if (info) this.#clustered = Boolean(info.cluster) || (info.connect_urls?.length ?? 0) > 0;
  }

  /** Resolves true once connected (at once if already), false when `ms` passed first. */
  async waitUp(ms: number): Promise<boolean> {
    if (this.connected) return true;
    return new Promise<boolean>((resolve) => {
      const done = (up: boolean) => {
        clearTimeout(timer);
        this.#listeners.delete(onUp);
        resolve(up);
      };
      const onUp = (up: boolean) => {
        if (up) done(true);
      };
      const timer = setTimeout(() => done(this.connected), Math.max(0, ms));
      this.#listeners.add(onUp);
    });
  }

  /** Called with false when the connection drops and true when it is back; returns how to stop. */
  onChange(fn: (up: boolean) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  async #watch(): Promise<void> {
    for await (const s of this.#nc.status()) {
      this.#refreshClustered();
      const up = s.type === "reconnect" ? true : s.type === "disconnect" ? false : this.#up;
      if (up === this.#up) continue;
      this.#up = up;
      for (const fn of this.#listeners) fn(up);
    }
  }
}
