import { setTimeout as sleep } from "node:timers/promises";
import { batchingLimits, MAX_URLS } from "@hookpost/contract";
import type {
  AckReplay,
  AttemptLog,
  ConfigChange,
  ConfigStore,
  ConnectionState,
  DestinationRecord,
  Logger,
  PipelinedPublisher,
} from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  destinationOfSubject,
  getOrInsert,
  partitionConsumer,
  partitionCount,
  TEST_CALL_HEADER,
  targetId,
} from "@hookpost/core";
import type { JetStreamClient, JetStreamManager, JsMsg } from "nats";
import { Batches } from "./batches.js";
import type { Breakers } from "./breaker.js";
import type { Capacity, Slot } from "./capacity.js";
import {
  type ConsumerSettings,
  ensureConsumer,
  partitionConsumerConfig,
  removeDestinationDeliveries,
} from "./consumers.js";
import type { BatchMember, DeliveryHandler } from "./delivery.js";
import { type DirectEnd, type DirectMsg, mayGoDirect } from "./direct.js";
import { Lanes } from "./lanes.js";
import type { LoopLag } from "./loop-lag.js";
import { ownsKey } from "./ordered/ownership.js";
import { deliveryState } from "./parking.js";
import { Puller } from "./puller.js";
import { RateGate } from "./rate-gate.js";
import type { ReplicaRegistry } from "./replica-registry.js";
import { waitTurn } from "./wait-turn.js";

/** The router consumer's ack wait is 30 s (core's topology): a direct attempt's call is kept alive more often. */
const DIRECT_KEEP_ALIVE_MS = 10_000;
/** How long a fresh delivery may wait for a slot or its rate limit before it is parked instead. */
const FRESH_WAIT_MS = 50;
/** A delivery pulled before its due time is handed back for what is left, at least this long. */
const MIN_NOT_DUE_MS = 20;
const RETRY_REMOVE_MS = 2000;
/** How often a removal looks whether the destination's deliveries in flight have ended. */
const QUIET_POLL_MS = 50;
/** How long a lane's delivery waits in memory for a slot before it is handed back to its lane. */
const LANE_SLOT_WAIT_MS = 1000;
/** How long a lane's delivery is handed back for when its destination is not known to answer. */
const NOT_ANSWERING_NAK_MS = 4000;
/** How long a formed batch waits for a slot (its members are kept alive meanwhile). */
const BATCH_SLOT_WAIT_MS = 30_000;
/** Members a batching destination's lane holds at most on one replica (forming and in flight). */
export const BATCH_LANE_MAX_PENDING = 20_000;

export interface DeliveriesDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Acks and naks of every puller go out through it (batched writes). */
  acks: PipelinedPublisher;
  ackReplay?: AckReplay | undefined;
  connection: ConnectionState;
  store: ConfigStore;
  handler: DeliveryHandler;
  logger: Logger;
  /** Live replicas, to split max_in_flight and rate_limit_per_second; absent: this replica is alone. */
  registry?: ReplicaRegistry;
  /** Aborted when shutdown's grace period is over. */
  shutdown: AbortSignal;
  consumer: ConsumerSettings;
  pullExpiresMs: number;
  /** DELIVERY_PARTITIONS: P, of which 2P partitions are made (topology's partitionCount). */
  partitions: number;
  /** DELIVERY_CONCURRENCY: a destination's in-flight limit on this replica without max_in_flight. */
  concurrency: number;
  capacity: Capacity;
  breakers: Breakers;
  /** Where breaker changes are reported for destination health. */
  attemptLog?: AttemptLog;
  lanes: { sweepMs: number; idleMs: number; onStrandedRecreated?: () => void };
  /**
   * The router's own first attempts (design §6; DIRECT_DELIVERY): at most `max` at once, to
   * destinations whose answers took at most `maxLatencyMs` on average. Absent: none.
   */
  direct?: { max: number; maxLatencyMs: number; lag?: LoopLag };
  /** RETRY_WINDOW: a delivery held back by an open breaker past it is dead-lettered. */
  retryWindowMs: number;
}

/**
 * The delivery core of one replica (docs/design/delivery-at-scale.md): P partition consumers
 * shared by every destination, and a lane per destination only while it has parked work.
 * A fresh delivery goes out at once when its destination may take it (enabled, breaker closed,
 * a free slot and rate within 50 ms); anything else is parked on its lane, so a partition never
 * holds a delivery longer than one request, and a failing destination waits in storage.
 */
export class Deliveries {
  readonly #d: DeliveriesDeps;
  readonly #partitions: Puller[] = [];
  /** Per partition: deliveries in flight to destinations not known to answer. */
  readonly #risky: number[];
  readonly #riskyWaiters: (() => void)[][];
  readonly #riskyMax: number;
  /** Partitions pulled: both classes (partitionCount). */
  readonly #count: number;
  readonly #gates = new Map<string, RateGate>();
  /** Deliveries being handled, per destination: a removal purges again once they are done. */
  readonly #busy = new Map<string, number>();
  readonly lanes: Lanes;
  readonly #batches: Batches;
  #removals = 0;
  #closed = false;
  /** Direct attempts in flight: their calls are kept alive on EVENTS by one timer. */
  readonly #direct = new Set<DirectMsg>();
  /** Direct attempts in flight or waiting for a slot (at most `direct.max`). */
  #directs = 0;
  /** Callers waiting for a direct attempt to end, first come first served (directTurn). */
  readonly #directWaiters: (() => void)[] = [];
  /** When a direct attempt last began or ended (performance.now()). */
  #directMovedMs = Number.NEGATIVE_INFINITY;
  #directTimer: NodeJS.Timeout | undefined;

  readonly #onChange = (c: ConfigChange) => {
    if (c.kind !== "destination") return;
    // A FAN_OUT destination's URLs are delivery targets of their own (shaping.md 7.2).
    const ids = [c.id, ...Array.from({ length: MAX_URLS }, (_, i) => targetId(c.id, i))];
    if (c.record) for (const id of ids) this.lanes.refresh(id);
    else for (const id of ids) this.#remove(id);
  };
  readonly #onReplicas = () => this.lanes.refreshAll();

  constructor(deps: DeliveriesDeps) {
    this.#d = deps;
    const perPartition = this.#partitionConcurrency();
    this.#count = partitionCount(deps.partitions);
    this.#risky = new Array(this.#count).fill(0);
    this.#riskyWaiters = Array.from({ length: this.#count }, () => []);
    this.#riskyMax = Math.max(1, Math.floor(perPartition / 2));
    this.lanes = new Lanes({
      ...deps,
      sweepMs: deps.lanes.sweepMs,
      idleMs: deps.lanes.idleMs,
      ...(deps.lanes.onStrandedRecreated && { onStrandedRecreated: deps.lanes.onStrandedRecreated }),
      concurrency: (id) => this.#laneConcurrency(id),
      heldForMs: (id) => deps.breakers.openForMs(id),
      handle: (id, msg) => this.#track(id, () => this.#handleLane(id, msg)),
      maxAckPending: (id) => (deps.store.destination(id)?.batching ? BATCH_LANE_MAX_PENDING : undefined),
    });
    this.#batches = new Batches({
      store: deps.store,
      handler: deps.handler,
      logger: deps.logger,
      ackWaitMs: deps.consumer.ackWaitMs,
      send: (id, members, key) => this.#sendBatch(id, members, key),
    });
    // Lanes stop or start pulling; health (GetDestinationHealth, the CLI, the console) shows it.
    deps.breakers.onChange = (id) => {
      this.lanes.refresh(id);
      deps.attemptLog?.breaker(id, deps.breakers.view(id));
    };
  }

  /** Creates the partition consumers (idempotent) and starts pulling them and the lanes. */
  async start(): Promise<void> {
    const d = this.#d;
    d.direct?.lag?.start();
    for (let p = 0; p < this.#count; p++) await ensureConsumer(d.jsm, partitionConsumerConfig(p, d.consumer));
    d.store.on("change", this.#onChange);
    d.registry?.on("change", this.#onReplicas);
    const concurrency = this.#partitionConcurrency();
    for (let p = 0; p < this.#count; p++) {
      const puller = new Puller({
        js: d.js,
        stream: DELIVERIES_STREAM,
        consumer: partitionConsumer(p),
        concurrency,
        expiresMs: d.pullExpiresMs,
        handle: (msg) =>
          this.#track(destinationOfSubject(msg.subject) ?? "", () => this.#handleFresh(p, msg)),
        acks: d.acks,
        ackReplay: d.ackReplay,
        connection: d.connection,
        logger: d.logger,
      });
      this.#partitions.push(puller);
      puller.resume();
    }
    this.lanes.start();
    d.logger.info({ partitions: this.#count, concurrency }, "delivering: every partition pulled");
  }

  /** Every partition is pulled here. */
  get pulling(): boolean {
    return this.#partitions.length === this.#count && this.#partitions.every((p) => p.running);
  }

  /**
   * Known here to answer, breaker closed: the router sends its calls to the partitions of
   * destinations that answer, away from a backlog to hung or new endpoints.
   */
  answering(id: string): boolean {
    return this.#d.capacity.answering(id) && !this.#d.breakers.isOpen(id);
  }

  /**
   * The router's own first attempt of a delivery (docs/design/delivery-at-scale.md §6), when its
   * destination may take it now: enabled, not batching, ordered or rate-limited, breaker
   * closed, answering fast, a slot free. Undefined when not: the router stores it on DELIVERIES.
   */
  async direct(id: string, make: () => DirectMsg): Promise<DirectEnd | undefined> {
    const d = this.#d;
    if (!d.direct || this.#closed || d.shutdown.aborted) return undefined;
    const dest = d.store.destination(id);
    if (!dest?.enabled || !mayGoDirect(dest) || dest.rateLimitPerSecond !== undefined) return undefined;
    // Twice the loop's lag: a request is written and its answer read each up to one lag late.
    const lag = d.direct.lag?.ms ?? 0;
    const maxMs = d.direct.maxLatencyMs + 2 * lag;
    if (d.breakers.isOpen(id) || d.capacity.stalled(id) || !d.capacity.fast(id, maxMs)) return undefined;
    if (this.#directs >= d.direct.max && !(await this.#directTurn(d.direct.max, FRESH_WAIT_MS + 2 * lag)))
      return undefined;
    this.#directs++;
    this.#directMovedMs = performance.now();
    try {
      // As a partition's delivery would: a slot within 50 ms, else it is stored.
      const slot =
        d.capacity.tryAcquire(id, this.#limit(dest)) ??
        (await d.capacity.acquire(id, () => this.#limit(dest), d.shutdown, FRESH_WAIT_MS));
      if (!slot) return undefined;
      const msg = make();
      this.#direct.add(msg);
      this.#directTimer ??= setInterval(() => {
        for (const m of this.#direct) m.working();
      }, DIRECT_KEEP_ALIVE_MS).unref();
      await this.#track(id, async () => {
        try {
          await d.handler.handle(id, msg, msg.state);
        } finally {
          slot.release();
          // Every path of the handler ends it; should one not, the router stores the delivery.
          msg.nak();
          this.#direct.delete(msg);
          if (this.#direct.size === 0) {
            clearInterval(this.#directTimer);
            this.#directTimer = undefined;
          }
        }
      });
      return await msg.ended;
    } finally {
      this.#directs--;
      this.#directMovedMs = performance.now();
      this.#directWaiters.shift()?.();
    }
  }

  /**
   * Whether a direct attempt's turn came within `waitMs` (50 ms and twice the loop's lag) while
   * they move. In a burst the router takes calls faster than they are delivered: storing the
   * overflow on DELIVERIES costs a publish, a pull and an ack per call (about a quarter of a
   * delivery's CPU, half of nats-server's), while the call is already safe on EVENTS. When no
   * direct attempt began or ended for that long (a destination turning slow holds them all), the
   * delivery is stored at once, as before: routing does not wait on a slow endpoint.
   */
  async #directTurn(max: number, waitMs: number): Promise<boolean> {
    const deadline = performance.now() + waitMs;
    while (this.#directs >= max) {
      const now = performance.now();
      if (this.#closed || now >= deadline || now - this.#directMovedMs > waitMs) return false;
      await waitTurn(this.#directWaiters, deadline - now);
    }
    return true;
  }

  /** No destination removal is being applied: every change seen so far is in effect here. */
  get idle(): boolean {
    return this.#removals === 0;
  }

  stopPulling(): void {
    this.#closed = true;
    for (const wake of [...this.#directWaiters]) wake();
    this.#d.direct?.lag?.stop();
    this.#d.store.off("change", this.#onChange);
    this.#d.registry?.off("change", this.#onReplicas);
    for (const p of this.#partitions) p.pause();
    this.lanes.stopPulling();
    this.#batches.close();
  }

  async settle(ms: number): Promise<boolean> {
    const all = await Promise.all([...this.#partitions.map((p) => p.settle(ms)), this.lanes.settle(ms)]);
    return all.every(Boolean);
  }

  async drain(): Promise<void> {
    await Promise.all([...this.#partitions.map((p) => p.drain()), this.lanes.drain()]);
  }

  /** Each partition of a class takes an equal part of the connection cap; at least 16. */
  #partitionConcurrency(): number {
    return Math.max(16, Math.ceil(this.#d.capacity.max / this.#d.partitions));
  }

  /**
   * A batching destination's lane is pulled by one replica at a time (rendezvous over the live
   * replicas, as ordered partitions): a retried batch then comes back whole to one place.
   */
  #ownsBatches(id: string): boolean {
    const r = this.#d.registry;
    return !r || ownsKey(r.id, r.live, id);
  }

  /**
   * This replica's in-flight limit for a destination (0 while its rate share is 0). A batching
   * destination's owner is its only sender: it takes the whole limit.
   */
  #limit(r: DestinationRecord): number {
    const share = (total: number) => (r.batching ? total : (this.#d.registry?.share(total) ?? total));
    if (r.rateLimitPerSecond !== undefined && share(r.rateLimitPerSecond) === 0) return 0;
    return r.maxInFlight === undefined ? this.#d.concurrency : share(r.maxInFlight);
  }

  #rate(id: string): number | undefined {
    const dest = this.#d.store.destination(id);
    const r = dest?.rateLimitPerSecond;
    if (r === undefined || dest?.batching) return r;
    return this.#d.registry?.share(r) ?? r;
  }

  #laneConcurrency(id: string): number {
    const r = this.#d.store.destination(id);
    if (!r?.enabled) return 0;
    if (r.batching && !this.#ownsBatches(id)) return 0;
    // A batching lane holds a batch's worth of members per request it may send.
    const per = r.batching ? batchingLimits(r.batching).maxCalls : 1;
    // Half-open: one probe at a time.
    if (this.#d.breakers.isOpen(id)) return per;
    return Math.min(BATCH_LANE_MAX_PENDING, per * this.#d.capacity.window(id, this.#limit(r)));
  }

  #gate(id: string): RateGate {
    return getOrInsert(this.#gates, id, () => new RateGate());
  }

  /** A fresh delivery from partition `p`: now, or parked on its lane. */
  async #handleFresh(p: number, msg: JsMsg): Promise<void> {
    const d = this.#d;
    const id = destinationOfSubject(msg.subject) ?? "";
    const dest = d.store.destination(id);
    if (!dest) {
      // Deleted: what is left of it is being purged.
      msg.term();
      return;
    }
    // A test call goes now, whatever the destination's state (core's TEST_CALL_HEADER).
    if (msg.headers?.has(TEST_CALL_HEADER)) {
      await d.handler.test(id, msg);
      return;
    }
    const state = deliveryState(msg);
    // A batch forms on the destination's own lane, never in a shared partition (shaping.md 7.1).
    if (dest.batching) {
      await d.handler.park(id, msg, state);
      return;
    }
    // Redelivered: an earlier try may have parked it already (its ack lost to a leader change or
    // a crash). Parking again is stored once; delivering it here could double its parked copy.
    if (msg.info.deliveryCount > 1 || !dest.enabled || d.breakers.isOpen(id) || this.#limit(dest) === 0) {
      await d.handler.park(id, msg, state);
      return;
    }
    if (dest.rateLimitPerSecond !== undefined) {
      const wait = AbortSignal.any([d.shutdown, AbortSignal.timeout(FRESH_WAIT_MS)]);
      if (!(await this.#gate(id).take(() => this.#rate(id), wait))) {
        await d.handler.park(id, msg, state);
        return;
      }
    }
    // Half of a partition's slots at most go to destinations not known to answer: hung
    // endpoints can never hold a whole partition, whatever they are sent.
    const risky = !d.capacity.answering(id);
    if (risky && !(await this.#takeRisky(p, d.capacity.stalled(id) ? 0 : FRESH_WAIT_MS))) {
      await d.handler.park(id, msg, state);
      return;
    }
    let slot: Slot | undefined;
    try {
      if (d.capacity.stalled(id)) slot = d.capacity.tryAcquire(id, this.#limit(dest));
      else slot = await d.capacity.acquire(id, () => this.#limit(dest), d.shutdown, FRESH_WAIT_MS);
      if (!slot) {
        await d.handler.park(id, msg, state);
        return;
      }
      await d.handler.handle(id, msg, state);
    } finally {
      slot?.release();
      if (risky) this.#giveRisky(p);
    }
  }

  /** One of partition p's slots for destinations not known to answer, waiting at most `maxWaitMs`. */
  async #takeRisky(p: number, maxWaitMs: number): Promise<boolean> {
    const deadline = performance.now() + maxWaitMs;
    while (this.#risky[p]! >= this.#riskyMax) {
      const left = deadline - performance.now();
      if (left <= 0 || this.#d.shutdown.aborted) return false;
      const waiters = this.#riskyWaiters[p]!;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          const i = waiters.indexOf(done);
          if (i >= 0) waiters.splice(i, 1);
          resolve();
        };
        const timer = setTimeout(done, left);
        waiters.push(done);
      });
    }
    this.#risky[p]!++;
    return true;
  }

  #giveRisky(p: number): void {
    this.#risky[p]!--;
    this.#riskyWaiters[p]!.shift()?.();
  }

  /** A parked delivery from its lane: waits for its due time, rate and slot, then goes. */
  async #handleLane(id: string, msg: JsMsg): Promise<void> {
    const d = this.#d;
    const dest = d.store.destination(id);
    if (!dest) {
      msg.term();
      return;
    }
    const state = deliveryState(msg);
    const notYet = state.dueMs - Date.now();
    if (notYet > 0) {
      msg.nak(Math.max(MIN_NOT_DUE_MS, notYet));
      return;
    }
    if (dest.enabled && d.breakers.isOpen(id) && Date.now() >= state.firstTimeMs + d.retryWindowMs) {
      // Its window ended while the breaker held it back: it will never get an attempt.
      await d.handler.expire(id, msg, state, d.breakers.lastFailure(id));
      return;
    }
    if (dest.batching && dest.enabled) {
      // The breaker, rate and slot are taken once per batch (#sendBatch).
      await this.#batches.add(id, msg, state);
      return;
    }
    if (!dest.enabled || !d.breakers.allow(id)) {
      // Paused, or the breaker's probe is already out: it waits on its lane.
      msg.nak(this.#breakerWaitMs(id));
      this.lanes.refresh(id);
      return;
    }
    const stop = keepAlive(msg, d.consumer.ackWaitMs);
    let slot: Slot | "rate" | undefined;
    try {
      slot = await this.#laneSlot(id, LANE_SLOT_WAIT_MS);
    } finally {
      stop();
    }
    if (slot === "rate") {
      msg.nak();
      return;
    }
    if (!slot) {
      d.breakers.released(id);
      msg.nak(this.#noSlotWaitMs(id));
      return;
    }
    await this.#inSlot(id, slot, () => d.handler.handle(id, msg, state));
  }

  /** How long a lane's delivery held back by its breaker is handed back for. */
  #breakerWaitMs(id: string): number {
    return Math.max(MIN_NOT_DUE_MS, this.#d.breakers.openForMs(id) ?? 1000);
  }

  /**
   * How long a lane's delivery that got no slot is handed back for. Held no longer than this: a
   * message held while a consumer leader is elected can outlive its ack wait and come a second
   * time; one handed back just comes again shortly. Not shortly when its destination is not known
   * to answer: its slot is held by an attempt that may run to the webhook timeout, and each
   * hand-back costs nats-server a delivery.
   */
  #noSlotWaitMs(id: string): number {
    return this.#d.capacity.answering(id) ? MIN_NOT_DUE_MS : NOT_ANSWERING_NAK_MS;
  }

  /** An attempt in a lane's slot, then the slot freed and the lane looked at again. */
  async #inSlot(id: string, slot: Slot, attempt: () => Promise<void>): Promise<void> {
    try {
      await attempt();
    } finally {
      slot.release();
      // A probe that ended without telling anything (handed back, paused): another may go.
      this.#d.breakers.released(id);
      this.lanes.refresh(id);
    }
  }

  /**
   * A lane request's turn: its rate limit ("rate" when shutdown came first; the breaker's probe
   * released), then a slot within `maxWaitMs` (undefined when none came).
   */
  async #laneSlot(id: string, maxWaitMs: number): Promise<Slot | "rate" | undefined> {
    const d = this.#d;
    if (
      d.store.destination(id)?.rateLimitPerSecond !== undefined &&
      !(await this.#gate(id).take(() => this.#rate(id), d.shutdown))
    ) {
      d.breakers.released(id);
      return "rate";
    }
    return d.capacity.acquire(
      id,
      () => {
        const r = d.store.destination(id);
        return r ? this.#limit(r) : 0;
      },
      d.shutdown,
      maxWaitMs,
    );
  }

  /** A formed batch: the breaker, the rate and one slot (one request), then the attempt. */
  async #sendBatch(id: string, members: BatchMember[], key: string): Promise<void> {
    const d = this.#d;
    const handBack = (ms: number) => {
      for (const m of members) m.msg.nak(ms);
    };
    if (!d.breakers.allow(id)) {
      handBack(this.#breakerWaitMs(id));
      this.lanes.refresh(id);
      return;
    }
    const slot = await this.#laneSlot(id, BATCH_SLOT_WAIT_MS);
    if (slot === "rate") {
      handBack(MIN_NOT_DUE_MS);
      return;
    }
    if (!slot) {
      d.breakers.released(id);
      handBack(this.#noSlotWaitMs(id));
      return;
    }
    await this.#inSlot(id, slot, () => d.handler.handleBatch(id, members, key));
  }

  async #track(id: string, work: () => Promise<void>): Promise<void> {
    this.#busy.set(id, (this.#busy.get(id) ?? 0) + 1);
    try {
      await work();
    } finally {
      const n = (this.#busy.get(id) ?? 1) - 1;
      if (n > 0) this.#busy.set(id, n);
      else this.#busy.delete(id);
    }
  }

  /** Resolves once no delivery of `id` is being handled here (or shutdown came). */
  async #quiet(id: string): Promise<void> {
    while (this.#busy.has(id) && !this.#d.shutdown.aborted)
      await sleep(QUIET_POLL_MS, undefined, { ref: false });
  }

  /** A deleted destination: its lane, its partitions' deliveries and its in-memory state go. */
  #remove(id: string): void {
    const d = this.#d;
    this.lanes.forget(id);
    this.#gates.delete(id);
    d.breakers.forget(id);
    d.capacity.forget(id);
    this.#removals++;
    // Purged twice: a delivery being handled at the removal may park (or its lane be created)
    // after the first purge; nothing new starts for a destination the store no longer has.
    removeDestinationDeliveries(d.jsm, id)
      .then(() => this.#quiet(id))
      .then(() => removeDestinationDeliveries(d.jsm, id))
      .then(() => d.logger.info({ destinationId: id }, "destination removed: pending deliveries purged"))
      .catch((err) => {
        d.logger.error(
          { destinationId: id, err: (err as Error).message },
          "purging a removed destination failed; retrying",
        );
        setTimeout(() => {
          if (!this.#closed && !d.store.destination(id)) this.#remove(id);
        }, RETRY_REMOVE_MS).unref();
      })
      .finally(() => this.#removals--);
  }
}

/** Tells JetStream a held delivery is still being worked on, until stopped. */
export function keepAlive(msg: JsMsg, ackWaitMs: number): () => void {
  const t = setInterval(() => msg.working(), Math.max(250, Math.floor(ackWaitMs / 3)));
  return () => clearInterval(t);
}
