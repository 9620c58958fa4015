import type { JetStreamClient, JetStreamManager } from "nats";
import type { ConfigChange, ConfigStore } from "../../lib/config/config-store.js";
import type { Logger } from "../../lib/log/logger.js";
import type { DestinationRecord } from "../../lib/model/destination.js";
import { DELIVERIES_STREAM, destinationConsumer } from "../../lib/nats/topology.js";
import { type ConsumerSettings, ensureDestinationConsumer, removeDestinationConsumer } from "./consumers.js";
import type { DeliveryHandler } from "./delivery.js";
import { Puller } from "./puller.js";

const RETRY_APPLY_MS = 2000;

export interface SupervisorDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  store: ConfigStore;
  handler: DeliveryHandler;
  consumer: ConsumerSettings;
  concurrency: number;
  pullExpiresMs: number;
  logger: Logger;
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
  #closed = false;
  readonly #onChange = (c: ConfigChange) => {
    if (c.kind === "destination") this.#enqueue(c.id, c.record);
  };

  constructor(deps: SupervisorDeps) {
    this.#d = deps;
  }

  async start(): Promise<void> {
    this.#d.store.on("change", this.#onChange);
    await Promise.all(this.#d.store.destinations().map((r) => this.#enqueue(r.id, r)));
  }

  /** Destination ids this replica pulls for. */
  active(): string[] {
    return [...this.#pullers].filter(([, p]) => p.running).map(([id]) => id);
  }

  /** Stops pulling everywhere; resolves when every open pull ended and in-flight work is done. */
  stopPulling(): void {
    this.#closed = true;
    this.#d.store.off("change", this.#onChange);
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
          concurrency: d.concurrency,
          expiresMs: d.pullExpiresMs,
          handle: (msg) => d.handler.handle(id, msg),
          logger: d.logger,
        });
        this.#pullers.set(id, puller);
      }
      if (!puller.running) d.logger.info({ destinationId: id }, "delivering to destination");
      puller.resume();
    } else if (puller?.running) {
      puller.pause();
      d.logger.info({ destinationId: id }, "destination disabled: delivery paused, backlog kept");
    }
  }
}
