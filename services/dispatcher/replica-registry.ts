import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import type { Logger } from "@hookpost/core";
import { DISPATCHERS_BUCKET } from "@hookpost/core";
import type { KV, NatsConnection } from "nats";

export { DISPATCHERS_BUCKET };

export interface RegistryOptions {
  replicas?: number;
  /** How often a replica re-announces itself. */
  heartbeatMs?: number;
  logger: Logger;
}

/**
 * The live dispatcher replicas, so that per-destination limits (rate_limit_per_second,
 * max_in_flight) can be split among them: each replica takes `share(total)`, and the shares add up
 * to exactly the total.
 *
 * Each replica puts its key every `heartbeatMs` and deletes it on a clean shutdown; every replica
 * watches the bucket. A replica not heard from for 3 heartbeats counts as gone (a crash leaves no
 * delete marker, and KV expiry does not notify watchers). Under churn the split errs on the safe
 * side: a newcomer is seen by the others within milliseconds (they shrink their share at once),
 * while a crashed replica's share is only taken over after 3 heartbeats (a little under-delivery,
 * never over the limit).
 *
 * Events: "change" after the set of live replicas changed.
 */
export class ReplicaRegistry extends EventEmitter<{ change: [] }> {
  readonly id = `${process.pid}-${randomBytes(4).toString("hex")}`;
  readonly #kv: KV;
  readonly #heartbeatMs: number;
  readonly #logger: Logger;
  /** Replica id -> when we last heard from it (local clock). */
  readonly #seen = new Map<string, number>();
  #live: string[] = [];
  #timer: NodeJS.Timeout | undefined;
  #stopWatch: (() => void) | undefined;

  private constructor(kv: KV, heartbeatMs: number, logger: Logger) {
    super();
    this.#kv = kv;
    this.#heartbeatMs = heartbeatMs;
    this.#logger = logger;
  }

  static async open(nc: NatsConnection, o: RegistryOptions): Promise<ReplicaRegistry> {
    const heartbeatMs = o.heartbeatMs ?? 2000;
    // Entries outlive their replica by little: the bucket stays small even after many crashes.
    const kv = await nc.jetstream().views.kv(DISPATCHERS_BUCKET, {
      history: 1,
      replicas: o.replicas ?? 1,
      ttl: heartbeatMs * 10,
    });
    const r = new ReplicaRegistry(kv, heartbeatMs, o.logger);
    await r.#announce();
    await r.#watch();
    r.#timer = setInterval(() => {
      r.#announce().catch((err) =>
        o.logger.warn({ err: (err as Error).message }, "replica heartbeat failed"),
      );
      r.#recompute();
    }, heartbeatMs);
    r.#timer.unref();
    return r;
  }

  /** Live replicas (this one included), sorted. */
  get live(): readonly string[] {
    return this.#live;
  }

  /**
   * This replica's part of `total`: total / N, the remainder going one each to the first replicas
   * in id order. 0 when total is smaller than N and this replica is not among the first.
   */
  share(total: number): number {
    const n = Math.max(1, this.#live.length);
    const i = Math.max(0, this.#live.indexOf(this.id));
    return Math.floor(total / n) + (i < total % n ? 1 : 0);
  }

  async #announce(): Promise<void> {
    await this.#kv.put(this.id, JSON.stringify({ at: new Date().toISOString() }));
    this.#seen.set(this.id, Date.now());
  }

  async #watch(): Promise<void> {
    let initialized!: () => void;
    const ready = new Promise<void>((resolve) => {
      initialized = resolve;
    });
    const iter = await this.#kv.watch({ key: ">", initializedFn: () => initialized() });
    this.#stopWatch = () => iter.stop();
    void (async () => {
      for await (const e of iter) {
        if (e.operation === "PUT") this.#seen.set(e.key, Date.now());
        else this.#seen.delete(e.key);
        this.#recompute();
      }
    })().catch(() => {});
    await ready;
    this.#recompute();
  }

  #recompute(): void {
    const cutoff = Date.now() - 3 * this.#heartbeatMs;
    for (const [id, at] of this.#seen) if (at < cutoff && id !== this.id) this.#seen.delete(id);
    this.#seen.set(this.id, this.#seen.get(this.id) ?? Date.now());
    const live = [...this.#seen.keys()].sort();
    if (live.join(" ") === this.#live.join(" ")) return;
    this.#live = live;
    this.#logger.info({ replicas: live.length }, "dispatcher replicas changed");
    this.emit("change");
  }

  /** Leaves the set at once, so the others take over this replica's share. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#stopWatch?.();
    await this.#kv.delete(this.id).catch(() => {});
  }
}
