import type {
  ConfigChange,
  ConfigStore,
  ConnectionState,
  DestinationRecord,
  Logger,
  PipelinedPublisher,
} from "@hookpost/core";
import { DELIVERIES_STREAM, destinationConsumer } from "@hookpost/core";
import type { JetStreamClient, JetStreamManager, JsMsg } from "nats";
import { type ConsumerSettings, ensureDestinationConsumer, removeDestinationConsumer } from "./consumers.js";
import type { DeliveryHandler } from "./delivery.js";
import { Puller } from "./puller.js";
import { RateGate } from "./rate-gate.js";
import type { ReplicaRegistry } from "./replica-registry.js";

const RETRY_APPLY_MS = 2000;

export interface SupervisorDeps {
  js: JetStreamClient;
  /** Acks and naks of every destination's puller go out through it (batched writes). */
  acks: PipelinedPublisher;
  /** The NATS connection's state, for the pullers (see Puller). */
  connection: ConnectionState;
  jsm: JetStreamManager;
  store: ConfigStore;
  handler: DeliveryHandler;
  consumer: ConsumerSettings;
  concurrency: number;
  pullExpiresMs: number;
  logger: Logger;
  /** Live replicas, to split max_in_flight and rate_limit_per_second; absent: this replica is alone. */
  registry?: ReplicaRegistry;
  /** Aborted when shutdown's grace period is over: deliveries waiting on the rate limit are handed back. */
  shutdown?: AbortSignal;
  /** How often a delivery waiting on the rate limit tells JetStream it is still being worked on. */
  ackWaitMs?: number;
}

/**
 * Keeps one puller per destination in step with the configuration, on every replica:
 * - a destination appears: its consumer is created (idempotently) and pulled;
 * - disabled: pulling stops; its backlog stays for when it is enabled again (the janitor
 *   dead-letters what outlives the retry window);
 * - deleted: its consumer is deleted and its pending deliveries purged.
 * Changes to one destination are applied in order; different destinations do not wait on each other.
 */
export class DestinationSupervisor {
  readonly #d: SupervisorDeps;
  readonly #pullers = new Map<string, Puller>();
  /** Pullers of deleted destinations whose last in-flight deliveries may still be running. */
  readonly #retired = new Set<Puller>();
  readonly #queues = new Map<string, Promise<void>>();
  readonly #gates = new Map<string, RateGate>();
  #closed = false;
  readonly #onReplicas = () => {
    for (const [id, p] of this.#pullers) {
      const r = this.#d.store.destination(id);
      if (r) p.setConcurrency(this.#concurrency(r));
    }
  };
  readonly #onChange = (c: ConfigChange) => {
    if (c.kind === "destination") this.#enqueue(c.id, c.record);
  };

  constructor(deps: SupervisorDeps) {
    this.#d = deps;
  }

  async start(): Promise<void> {
    this.#d.store.on("change", this.#onChange);
    this.#d.registry?.on("change", this.#onReplicas);
    await Promise.all(this.#d.store.destinations().map((r) => this.#enqueue(r.id, r)));
  }

  /** No destination change is being applied: every change seen so far is in effect here. */
  get idle(): boolean {
    return this.#queues.size === 0;
  }

  /** Destination ids this replica pulls for. */
  active(): string[] {
    return [...this.#pullers].filter(([, p]) => p.running).map(([id]) => id);
  }

  /** Stops pulling everywhere; resolves when every open pull ended and in-flight work is done. */
  stopPulling(): void {
    this.#closed = true;
    this.#d.store.off("change", this.#onChange);
    this.#d.registry?.off("change", this.#onReplicas);
    for (const p of this.#pullers.values()) p.pause();
  }

  async settle(ms: number): Promise<boolean> {
    const all = await Promise.all([...this.#pullers.values(), ...this.#retired].map((p) => p.settle(ms)));
    return all.every(Boolean);
  }

  async drain(): Promise<void> {
    await Promise.allSettled([...this.#queues.values()]);
    await Promise.all([...this.#pullers.values(), ...this.#retired].map((p) => p.drain()));
  }

  #enqueue(id: string, record: DestinationRecord | undefined): Promise<void> {
    const prev = this.#queues.get(id) ?? Promise.resolve();
    const next = prev
      .then(() => this.#apply(id, record))
      .catch((err) => {
        this.#d.logger.error(
          { destinationId: id, err: (err as Error).message },
          "applying destination change failed; retrying",
        );
        // NATS may be unreachable for a while: try again with whatever the configuration is then.
        setTimeout(() => {
          if (!this.#closed) void this.#enqueue(id, this.#d.store.destination(id));
        }, RETRY_APPLY_MS).unref();
      });
    this.#queues.set(id, next);
    void next.finally(() => {
      if (this.#queues.get(id) === next) this.#queues.delete(id);
    });
    return next;
  }

  /**
   * This replica's in-flight cap for a destination: its share of max_in_flight, else
   * DELIVERY_CONCURRENCY; 0 while its share of the rate limit is 0 (fewer per second than replicas).
   */
  #concurrency(r: DestinationRecord): number {
    const share = (total: number) => this.#d.registry?.share(total) ?? total;
    if (r.rateLimitPerSecond !== undefined && share(r.rateLimitPerSecond) === 0) return 0;
    return r.maxInFlight === undefined ? this.#d.concurrency : share(r.maxInFlight);
  }

  /**
   * Waits for the destination's rate limit (this replica's share of it), then delivers. The wait
   * holds the message (kept alive with "working"), so it never counts as a failed attempt.
   */
  async #handle(id: string, msg: JsMsg): Promise<void> {
    const d = this.#d;
    const limit = () => {
      const r = d.store.destination(id)?.rateLimitPerSecond;
      return r === undefined ? undefined : (d.registry?.share(r) ?? r);
    };
    if (limit() !== undefined) {
      const gate = this.#gates.get(id) ?? new RateGate();
      this.#gates.set(id, gate);
      const keepAlive = setInterval(
        () => msg.working(),
        Math.max(250, Math.floor((d.ackWaitMs ?? 30_000) / 3)),
      );
      const signal = d.shutdown ?? new AbortController().signal;
      let go: boolean;
      try {
        go = await gate.take(limit, signal);
      } finally {
        clearInterval(keepAlive);
      }
      if (!go) {
        msg.nak();
        return;
      }
    }
    await d.handler.handle(id, msg);
  }

  async #apply(id: string, record: DestinationRecord | undefined): Promise<void> {
    const d = this.#d;
    if (this.#closed) return;
    if (!record) {
      const puller = this.#pullers.get(id);
      this.#pullers.delete(id);
      if (puller) {
        puller.abortPull();
        this.#retired.add(puller);
        void puller.drain().finally(() => this.#retired.delete(puller));
      }
      this.#gates.delete(id);
      await removeDestinationConsumer(d.jsm, id);
      d.logger.info(
        { destinationId: id },
        "destination removed: consumer deleted, pending deliveries purged",
      );
      return;
    }
    await ensureDestinationConsumer(d.jsm, id, d.consumer);
    if (this.#closed) return;
    let puller = this.#pullers.get(id);
    if (record.enabled) {
      if (!puller) {
        puller = new Puller({
          js: d.js,
          stream: DELIVERIES_STREAM,
          consumer: destinationConsumer(id),
          concurrency: this.#concurrency(record),
          expiresMs: d.pullExpiresMs,
          handle: (msg) => this.#handle(id, msg),
          acks: d.acks,
          connection: d.connection,
          logger: d.logger,
        });
        this.#pullers.set(id, puller);
      }
      puller.setConcurrency(this.#concurrency(record));
      if (!puller.running) d.logger.info({ destinationId: id }, "delivering to destination");
      puller.resume();
    } else if (puller?.running) {
      puller.pause();
      d.logger.info({ destinationId: id }, "destination disabled: delivery paused, backlog kept");
    }
  }
}
