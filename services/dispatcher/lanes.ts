import type { AckReplay, ConfigStore, ConnectionState, Logger, PipelinedPublisher } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  destinationOfSubject,
  isNotFound,
  LANE_SUBJECT_PREFIX,
  laneConsumer,
  laneSubject,
} from "@hookpost/core";
import type { JetStreamClient, JetStreamManager, JsMsg } from "nats";
import { type ConsumerSettings, deleteConsumer, ensureConsumer, laneConsumerConfig } from "./consumers.js";
import { Puller } from "./puller.js";
import { restoreUncounted } from "./restore.js";
import { holdLimit, lookAt, lookFields, StrandedTurns } from "./stranded.js";

export interface LanesDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  acks: PipelinedPublisher;
  ackReplay?: AckReplay | undefined;
  connection: ConnectionState;
  store: ConfigStore;
  logger: Logger;
  consumer: ConsumerSettings;
  pullExpiresMs: number;
  /** How often lanes holding messages are checked for a consumer, and empty ones for idleness. */
  sweepMs: number;
  /** An empty lane's consumer is deleted after this. */
  idleMs: number;
  /** How many of a lane's deliveries this replica may work on now (0: none: paused, breaker open). */
  concurrency: (id: string) => number;
  /** How long (ms) until a lane held back by its breaker may pull again (its probe), if it is held back. */
  heldForMs: (id: string) => number | undefined;
  handle: (id: string, msg: JsMsg) => Promise<void>;
  /** A lane's max_ack_pending when not the setting's (a batching destination holds many at once). */
  maxAckPending?: (id: string) => number | undefined;
  /** Told of each lane consumer created again because it lost count (stranded.ts). */
  onStrandedRecreated?: () => void;
}

/** Lane consumers the sweep creates at once. */
const CREATE_BATCH = 32;
/** Busy lanes looked at for stranded deliveries per sweep, in turn. */
const STRAND_CHECKS = 8;

interface Lane {
  puller: Puller | undefined;
  /** First sweep that found it empty (nothing stored, nothing in flight). */
  emptySince: number | undefined;
  /** Wakes a lane held back by its breaker when its probe may go. */
  timer: NodeJS.Timeout | undefined;
}

/**
 * Per-destination lanes (docs/design/delivery-at-scale.md §2): a consumer `lane_<id>` exists only
 * while `hookpost.lanes.<id>` holds parked deliveries. It is created by the replica that parks
 * first (and by the sweep, which also closes the race with a removal), and deleted once it was
 * empty for `idleMs`. A destination without parked work has no lane, no consumer, no puller and
 * no timer on any replica.
 */
export class Lanes {
  readonly #d: LanesDeps;
  readonly #lanes = new Map<string, Lane>();
  readonly #creating = new Map<string, Promise<void>>();
  readonly #retired = new Set<Puller>();
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<void> | undefined;
  #closed = false;
  /** What the stranded check saw of each lane's consumer (stranded.ts). */
  readonly #strands = new StrandedTurns<string>();
  #strandCursor = 0;

  constructor(deps: LanesDeps) {
    this.#d = deps;
  }

  /** Destinations with a lane on this replica. */
  get size(): number {
    return this.#lanes.size;
  }

  start(): void {
    const tick = () => {
      this.#sweeping = this.sweep()
        .catch((err) => this.#d.logger.warn({ err: (err as Error).message }, "lane sweep failed"))
        .finally(() => {
          this.#sweeping = undefined;
          if (!this.#closed) this.#timer = setTimeout(tick, this.#d.sweepMs).unref();
        });
    };
    tick();
  }

  /** The lane exists (its consumer is created once per replica) and pulls as much as it may. */
  ensure(id: string): Promise<void> {
    // A deleted destination's lane is purged, not opened (a park that raced the removal).
    if (this.#closed || !this.#d.store.destination(id)) return Promise.resolve();
    if (this.#lanes.has(id)) {
      this.refresh(id);
      return Promise.resolve();
    }
    let p = this.#creating.get(id);
    if (!p) {
      const maxAckPending = this.#d.maxAckPending?.(id);
      const settings =
        maxAckPending === undefined ? this.#d.consumer : { ...this.#d.consumer, maxAckPending };
      p = ensureConsumer(this.#d.jsm, laneConsumerConfig(id, settings))
        .then(() => {
          if (this.#closed || this.#lanes.has(id)) return;
          this.#lanes.set(id, { puller: undefined, emptySince: undefined, timer: undefined });
          this.#d.logger.info({ destinationId: id }, "lane opened");
          this.refresh(id);
        })
        .catch((err) => {
          // The sweep tries again: parked deliveries are stored whether a consumer exists or not.
          this.#d.logger.warn({ destinationId: id, err: (err as Error).message }, "creating a lane failed");
        })
        .finally(() => this.#creating.delete(id));
      this.#creating.set(id, p);
    }
    return p;
  }

  /** The lane exists here, or is being created (cheap when it does: asked for every routed call). */
  open(id: string): void {
    if (!this.#lanes.has(id)) void this.ensure(id);
  }

  /** Applies the lane's concurrency now: after a breaker change, a pause, a config change. */
  refresh(id: string): void {
    const lane = this.#lanes.get(id);
    if (!lane || this.#closed) return;
    clearTimeout(lane.timer);
    lane.timer = undefined;
    const held = this.#d.heldForMs(id);
    if (held !== undefined && held > 0) {
      lane.puller?.pause();
      lane.timer = setTimeout(() => this.refresh(id), held + 10).unref();
      return;
    }
    const n = this.#d.concurrency(id);
    if (n <= 0) {
      lane.puller?.pause();
      return;
    }
    lane.puller ??= this.#puller(id);
    lane.puller.setConcurrency(n);
    lane.puller.resume();
  }

  /** Every lane's concurrency again (replicas joined or left). */
  refreshAll(): void {
    for (const id of this.#lanes.keys()) this.refresh(id);
  }

  /** The destination was deleted: its lane goes (the consumer is deleted by the caller). */
  forget(id: string): void {
    this.#drop(id);
  }

  /**
   * Lanes that hold messages get a consumer; lanes empty for `idleMs` lose theirs. One stream
   * info with a subjects filter lists exactly the lanes holding messages.
   */
  async sweep(): Promise<void> {
    const d = this.#d;
    if (!d.connection.connected) return;
    const info = await d.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: `${LANE_SUBJECT_PREFIX}>` });
    const stored = new Map<string, number>();
    for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
      const id = destinationOfSubject(subject);
      if (id !== undefined && d.store.destination(id)) stored.set(id, n);
    }
    const busy = new Set(stored.keys());
    // A few creates at a time: after a restart with thousands of parked lanes, one burst of
    // consumer creates would stall the JetStream API for everyone.
    const missing = [...busy].filter((id) => !this.#lanes.has(id));
    for (let i = 0; i < missing.length; i += CREATE_BATCH) {
      await Promise.all(missing.slice(i, i + CREATE_BATCH).map((id) => this.ensure(id)));
    }
    await this.#checkStranded(stored);
    const now = Date.now();
    for (const [id, lane] of this.#lanes) {
      if (busy.has(id)) {
        lane.emptySince = undefined;
        continue;
      }
      if (lane.puller && lane.puller.inFlight > 0) {
        lane.emptySince = undefined;
        continue;
      }
      lane.emptySince ??= now;
      if (now - lane.emptySince < d.idleMs) continue;
      let info: Awaited<ReturnType<JetStreamManager["consumers"]["info"]>> | undefined;
      try {
        info = await d.jsm.consumers.info(DELIVERIES_STREAM, laneConsumer(id));
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      if (info && (info.num_pending > 0 || info.num_ack_pending > 0)) {
        lane.emptySince = undefined;
        continue;
      }
      // A delivery parked right now stays stored without a consumer; the next sweep brings it back.
      this.#drop(id);
      await deleteConsumer(d.jsm, laneConsumer(id));
      d.logger.info({ destinationId: id }, "idle lane removed");
    }
  }

  /**
   * A lane whose consumer no longer counts what it stores (stranded.ts: a nats-server fault after
   * leader changes) would never deliver it: its consumer is deleted and created again, which
   * hands out everything the lane stores. What was in flight may come twice.
   */
  async #checkStranded(stored: Map<string, number>): Promise<void> {
    const d = this.#d;
    this.#strands.keepOnly((id) => stored.has(id));
    const ids = [...stored.keys()].filter((id) => this.#lanes.has(id));
    for (let i = 0; i < Math.min(STRAND_CHECKS, ids.length); i++) {
      const id = ids[this.#strandCursor++ % ids.length]!;
      const look = await lookAt(d.jsm, laneConsumer(id), laneSubject(id), stored.get(id));
      if (!look) continue;
      const next = await this.#strands.next(id, look, holdLimit(d.consumer.ackWaitMs), () =>
        restoreUncounted(d, laneSubject(id), look.info),
      );
      if (next === undefined) continue;
      if (next !== "recreate") {
        d.onStrandedRecreated?.();
        d.logger.warn(
          { destinationId: id, restored: next, ...lookFields(look) },
          "stranded deliveries: the lane's consumer passed messages the lane stores without counting them; stored again",
        );
        continue;
      }
      this.#drop(id);
      await deleteConsumer(d.jsm, laneConsumer(id));
      d.onStrandedRecreated?.();
      d.logger.warn(
        { destinationId: id, ...lookFields(look) },
        "stranded deliveries: the lane's consumer no longer counted what the lane stores; created again",
      );
      await this.ensure(id);
    }
  }

  stopPulling(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const lane of this.#lanes.values()) {
      clearTimeout(lane.timer);
      lane.puller?.pause();
    }
  }

  async settle(ms: number): Promise<boolean> {
    const all = await Promise.all(this.#pullers().map((p) => p.settle(ms)));
    return all.every(Boolean);
  }

  async drain(): Promise<void> {
    await this.#sweeping;
    await Promise.allSettled([...this.#creating.values()]);
    await Promise.all(this.#pullers().map((p) => p.drain()));
  }

  #pullers(): Puller[] {
    const out = [...this.#retired];
    for (const lane of this.#lanes.values()) if (lane.puller) out.push(lane.puller);
    return out;
  }

  #puller(id: string): Puller {
    const d = this.#d;
    return new Puller({
      js: d.js,
      stream: DELIVERIES_STREAM,
      consumer: laneConsumer(id),
      concurrency: 1,
      expiresMs: d.pullExpiresMs,
      handle: (msg) => d.handle(id, msg),
      acks: d.acks,
      ackReplay: d.ackReplay,
      connection: d.connection,
      logger: d.logger,
      // Another replica removed the idle lane: forget it here too; the sweep brings it back if needed.
      onGone: () => {
        d.logger.info({ destinationId: id }, "lane consumer gone");
        this.#drop(id);
      },
    });
  }

  #drop(id: string): void {
    const lane = this.#lanes.get(id);
    if (!lane) return;
    this.#lanes.delete(id);
    clearTimeout(lane.timer);
    const p = lane.puller;
    if (p) {
      p.abortPull();
      this.#retired.add(p);
      void p.drain().finally(() => this.#retired.delete(p));
    }
  }
}
