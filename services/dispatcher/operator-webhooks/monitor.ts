import {
  DEFAULT_BEHIND_AFTER_MS,
  DEFAULT_FAILING_BELOW,
  type OperatorEventType,
  recoveredAtOrAbove,
} from "@hookpost/contract";
import type { ConfigStore, DestinationRecord, Logger, OperatorWebhookRecord } from "@hookpost/core";
import { wantsEvent } from "@hookpost/core";
import type { JetStreamManager, NatsConnection } from "nats";
import type { AlertSettings } from "../config.js";
import type { DispatcherMetrics } from "../metrics.js";
import type { ReplicaRegistry } from "../replica-registry.js";
import {
  AlertState,
  type ConditionState,
  conditionKey,
  DEAD_LETTERS_KEY,
  type DeadLetterState,
  type DisabledState,
  disabledKey,
} from "./alert-state.js";
import {
  behindEvent,
  deadLetterEvent,
  disabledEvent,
  eventId,
  failingEvent,
  type HealthFacts,
  type OperatorEvent,
  recoveredEvent,
  recoveredFromBehind,
  recoveredFromFailing,
} from "./events.js";
import { AlertFeed } from "./health-window.js";
import { PendingAges } from "./pending-ages.js";
import type { OperatorEventPublisher } from "./publisher.js";

export interface MonitorDeps {
  nc: NatsConnection;
  jsm: JetStreamManager;
  /** The dispatcher's store (operator webhooks and destinations). */
  store: ConfigStore;
  registry: ReplicaRegistry;
  publisher: OperatorEventPublisher;
  metrics: DispatcherMetrics;
  logger: Logger;
  settings: AlertSettings;
  /** STREAM_REPLICAS, for the alerts bucket. */
  replicas: number;
  now?: () => number;
}

/** A dead-letter window is announced this long after it ended: the summaries of its last second have arrived. */
const DEAD_LETTER_GRACE_MS = 3000;
/** An auto-disable older than this when first seen (an upgrade, say) is recorded, not announced. */
const DISABLED_RECENT_MS = 3_600_000;
/** Series of hookpost_dispatcher_oldest_pending_seconds at most. */
export const OLDEST_PENDING_SERIES = 50;
/** Transitions written at once (each: its events stored, then its state). */
const WRITES_IN_FLIGHT = 16;

/**
 * Watches every destination for the operational webhooks (docs/api.md#operational-webhooks) and
 * announces what changed. One replica watches: the first of the live replicas by id (the replica
 * registry that splits rate limits); when it leaves or dies the next one takes over within the
 * registry's 6 s, reloading the announced state from the alerts bucket and the last windows of
 * health summaries (and a watcher that was cut off meanwhile reloads it too when it is back:
 * AlertState.current). During a hand-over two replicas may both look: every announcement is a
 * compare-and-set of that state (alert-state.ts) and every event id is derived from what it
 * announces (events.ts), so a double is refused or stored once.
 *
 * Each check (ALERT_CHECK_INTERVAL), per operator webhook and destination, a small state machine
 * with hysteresis and a minimum interval (docs/operations.md#alerting):
 * - failing: success rate over ALERT_HEALTH_WINDOW below the webhook's `failing_below`, with at
 *   least ALERT_MIN_ATTEMPTS attempts; recovered at or above halfway between it and 1;
 * - behind: oldest pending call older than `behind_after`; recovered under half of it;
 * - at most one event per condition every ALERT_MIN_INTERVAL: a change in between waits, and
 *   is announced then if it still holds (a flapping destination sends nothing more).
 * And per destination: destination.disabled once per auto-disable; dead_letter.created once per
 * tumbling window of ALERT_DEAD_LETTER_WINDOW that saw dead letters, with their count.
 */
export class AlertMonitor {
  readonly #d: MonitorDeps;
  readonly #ages: PendingAges;
  #state: AlertState | undefined;
  #feed: AlertFeed | undefined;
  #loaded = false;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #closed = false;

  constructor(deps: MonitorDeps) {
    this.#d = deps;
    this.#ages = new PendingAges(deps.jsm, { lookups: deps.settings.behindLookups });
  }

  start(): void {
    this.#schedule(Math.min(1000, this.#d.settings.checkMs));
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#running;
    this.#stopWatching();
  }

  /** This replica watches now (tests). */
  get watching(): boolean {
    return this.#feed !== undefined;
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#running = this.#tick()
        .catch((err) => this.#d.logger.warn({ err: (err as Error).message }, "alert check failed"))
        .finally(() => {
          this.#running = undefined;
          this.#schedule(this.#d.settings.checkMs);
        });
    }, ms);
    this.#timer.unref();
  }

  #now(): number {
    return this.#d.now?.() ?? Date.now();
  }

  async #tick(): Promise<void> {
    const d = this.#d;
    if (d.registry.live[0] !== d.registry.id) {
      if (this.#feed) d.logger.info("another replica watches destinations for operational webhooks now");
      this.#stopWatching();
      return;
    }
    if (!this.#feed) {
      d.logger.info("watching destinations for operational webhooks");
      this.#state ??= await AlertState.open(d.nc, {
        replicas: d.replicas,
        logger: d.logger,
        replica: d.registry.id,
      });
      this.#feed = new AlertFeed(d.nc, d.logger, {
        windowMs: d.settings.healthWindowMs,
        deadWindowMs: d.settings.deadLetterWindowMs,
        nowMs: this.#now(),
      });
      this.#feed.start();
      this.#loaded = false;
    }
    // Loaded at the takeover, and again when another replica watched meanwhile (this one was cut
    // off, or stalled, long enough for the others to see it gone): its announcements are followed.
    if (!this.#loaded || !(await this.#state!.current())) {
      this.#loaded = false;
      await this.#state!.load();
      this.#loaded = true;
    }
    // Figures before the feed has read the last windows would be partial.
    if (!this.#feed.ready) return;
    const done = d.metrics.alertCheckSeconds.startTimer();
    await this.#check(this.#feed, this.#state!);
    done();
  }

  #stopWatching(): void {
    this.#feed?.close();
    this.#feed = undefined;
    this.#loaded = false;
    this.#d.metrics.oldestPending.reset();
  }

  async #check(feed: AlertFeed, state: AlertState): Promise<void> {
    const d = this.#d;
    const now = this.#now();
    const webhooks = d.store.operatorWebhooks();
    const destinations = d.store.destinations();
    await this.#disabled(state, destinations, webhooks, now);
    const ages = await this.#pendingAges(state, destinations, webhooks, now);
    await this.#conditions(feed, state, destinations, webhooks, ages, now);
    await this.#deadLetters(feed, state, new Map(destinations.map((x) => [x.id, x])), webhooks, now);
    await this.#forgetGone(state);
  }

  /** destination.disabled, once per auto-disable (an operator's pause has no reason and is not announced). */
  async #disabled(
    state: AlertState,
    destinations: readonly DestinationRecord[],
    webhooks: readonly OperatorWebhookRecord[],
    now: number,
  ): Promise<void> {
    const wanting = webhooks.filter((w) => wantsEvent(w, "destination.disabled"));
    const paused = new Set<string>();
    for (const dest of destinations) {
      if (dest.enabled || !dest.disabledReason || !dest.disabledAt) continue;
      paused.add(dest.id);
      const key = disabledKey(dest.id);
      if (state.get<DisabledState>(key)?.disabledAt === dest.disabledAt) continue;
      const recent = now - Date.parse(dest.disabledAt) < DISABLED_RECENT_MS;
      if (recent && !(await this.#d.publisher.emit(disabledEvent(now, dest), wanting))) continue;
      await state.put(key, { disabledAt: dest.disabledAt } satisfies DisabledState);
    }
    for (const key of state.keys("d.")) if (!paused.has(key.slice(2))) await state.remove(key);
  }

  /** The oldest pending call of the enabled destinations, and the metric of the oldest ones. */
  async #pendingAges(
    state: AlertState,
    destinations: readonly DestinationRecord[],
    webhooks: readonly OperatorWebhookRecord[],
    now: number,
  ): Promise<Map<string, number | undefined>> {
    const behindAfter = webhooks
      .filter((w) => wantsEvent(w, "destination.behind"))
      .map((w) => w.behindAfterMs ?? DEFAULT_BEHIND_AFTER_MS);
    // Below half the lowest threshold nothing can be behind, nor stop anything from recovering.
    const floorMs = Math.min(DEFAULT_BEHIND_AFTER_MS, ...behindAfter) / 2;
    const behind = new Set<string>();
    for (const key of state.keys("c.")) {
      if (state.get<ConditionState>(key)?.behind !== undefined) behind.add(key.split(".")[2]!);
    }
    const ages = await this.#ages.look(
      destinations.filter((x) => x.enabled),
      floorMs,
      now,
      behind,
    );
    const oldest = [...ages]
      .filter((e): e is [string, number] => e[1] !== undefined)
      .sort((a, b) => a[1] - b[1])
      .slice(0, OLDEST_PENDING_SERIES);
    const gauge = this.#d.metrics.oldestPending;
    gauge.reset();
    for (const [id, t] of oldest) gauge.set({ destination: id }, Math.max(0, (now - t) / 1000));
    return ages;
  }

  /** failing / behind and their recovery, per operator webhook and destination. */
  async #conditions(
    feed: AlertFeed,
    state: AlertState,
    destinations: readonly DestinationRecord[],
    webhooks: readonly OperatorWebhookRecord[],
    ages: ReadonlyMap<string, number | undefined>,
    now: number,
  ): Promise<void> {
    const { minAttempts } = this.#d.settings;
    const lowestBehind = Math.min(...webhooks.map((w) => w.behindAfterMs ?? DEFAULT_BEHIND_AFTER_MS));
    const announced = new Set(state.keys("c.").map((k) => k.split(".")[2]!));
    const writes: (() => Promise<void>)[] = [];
    for (const dest of destinations) {
      const h = feed.health(dest.id, now);
      // A paused destination's calls wait by design: it is neither behind nor caught up.
      const age = !dest.enabled || !ages.has(dest.id) ? undefined : now - (ages.get(dest.id) ?? now);
      // Most destinations, most of the time: nothing to announce and nothing announced.
      if (!announced.has(dest.id) && h.attempts < minAttempts && (age ?? 0) < lowestBehind) continue;
      for (const w of webhooks) {
        const key = conditionKey(w.id, dest.id);
        const st = state.get<ConditionState>(key) ?? { seq: 0 };
        const change = this.#transition(w, dest, st, h, age, ages.get(dest.id), now);
        if (!change) continue;
        writes.push(async () => {
          // Stored first, then recorded: a failure in between sends the same ids again next time.
          for (const e of change.events) if (!(await this.#d.publisher.emit(e, [w]))) return;
          await state.put(key, change.next);
        });
      }
    }
    for (let i = 0; i < writes.length; i += WRITES_IN_FLIGHT) {
      await Promise.all(writes.slice(i, i + WRITES_IN_FLIGHT).map((write) => write()));
    }
  }

  /**
   * One webhook's state machine for one destination: the next state and its events, or undefined
   * when nothing changes. `age`: how long its oldest pending call has waited, undefined when not
   * known at this check (paused, or left for a later check).
   */
  #transition(
    w: OperatorWebhookRecord,
    dest: DestinationRecord,
    st: ConditionState,
    h: HealthFacts,
    age: number | undefined,
    oldest: number | undefined,
    now: number,
  ): { next: ConditionState; events: OperatorEvent[] } | undefined {
    const { minAttempts, minIntervalMs } = this.#d.settings;
    const due = (last: number | undefined) => last === undefined || now - last >= minIntervalMs;
    const threshold = w.failingBelow ?? DEFAULT_FAILING_BELOW;
    const behindAfter = w.behindAfterMs ?? DEFAULT_BEHIND_AFTER_MS;
    const next: ConditionState = { ...st };
    const events: OperatorEvent[] = [];
    const id = (type: OperatorEventType) =>
      eventId(type, w.id, w.createdAt, dest.id, dest.createdAt, next.seq);

    const failing = h.attempts >= minAttempts && h.successRate < threshold;
    const healthy = h.attempts > 0 && h.successRate >= recoveredAtOrAbove(threshold);
    if (st.failing === undefined && failing && wantsEvent(w, "destination.failing")) {
      if (due(st.lastFailingEvent)) {
        next.seq++;
        next.failing = now;
        next.lastFailingEvent = now;
        events.push(failingEvent(id("destination.failing"), now, dest, h, threshold));
      }
    } else if (st.failing !== undefined && healthy && due(st.lastFailingEvent)) {
      next.seq++;
      delete next.failing;
      next.lastFailingEvent = now;
      if (wantsEvent(w, "destination.recovered")) {
        const figures = recoveredFromFailing(h, threshold);
        events.push(recoveredEvent(id("destination.recovered"), now, dest, "failing", st.failing, figures));
      }
    }

    if (age !== undefined) {
      if (st.behind === undefined && age >= behindAfter && wantsEvent(w, "destination.behind")) {
        if (due(st.lastBehindEvent)) {
          next.seq++;
          next.behind = now;
          next.lastBehindEvent = now;
          events.push(
            behindEvent(id("destination.behind"), now, dest, {
              oldestMs: oldest!,
              behindAfterMs: behindAfter,
            }),
          );
        }
      } else if (st.behind !== undefined && age < behindAfter / 2 && due(st.lastBehindEvent)) {
        next.seq++;
        delete next.behind;
        next.lastBehindEvent = now;
        if (wantsEvent(w, "destination.recovered")) {
          const figures = recoveredFromBehind(now, oldest, behindAfter);
          events.push(recoveredEvent(id("destination.recovered"), now, dest, "behind", st.behind, figures));
        }
      }
    }
    return next.seq === st.seq ? undefined : { next, events };
  }

  /** dead_letter.created: one per destination and finished window that saw dead letters. */
  async #deadLetters(
    feed: AlertFeed,
    state: AlertState,
    destinations: ReadonlyMap<string, DestinationRecord>,
    webhooks: readonly OperatorWebhookRecord[],
    now: number,
  ): Promise<void> {
    const windowMs = this.#d.settings.deadLetterWindowMs;
    const lastDone = Math.floor((now - DEAD_LETTER_GRACE_MS) / windowMs) - 1;
    const st = state.get<DeadLetterState>(DEAD_LETTERS_KEY);
    const firstCovered = Math.ceil(feed.coveredFromMs / windowMs);
    const from = Math.max(st?.windowMs === windowMs ? st.index + 1 : firstCovered, firstCovered);
    const wanting = webhooks.filter((w) => wantsEvent(w, "dead_letter.created"));
    for (let index = from; index <= lastDone; index++) {
      for (const [id, c] of feed.deadLetters(index)) {
        // A deleted destination's dead letters are not announced.
        const dest = destinations.get(id);
        if (!dest) continue;
        const event = deadLetterEvent(now, dest, { index, ms: windowMs }, c.count, c.lastReason);
        if (!(await this.#d.publisher.emit(event, wanting))) return;
      }
      if (!(await state.put(DEAD_LETTERS_KEY, { windowMs, index } satisfies DeadLetterState))) return;
      feed.forgetDeadLetters(index);
    }
  }

  /** State of deleted destinations and webhooks goes with them. */
  async #forgetGone(state: AlertState): Promise<void> {
    const { store } = this.#d;
    for (const key of state.keys("c.")) {
      const [, webhookId, destinationId] = key.split(".");
      if (!store.operatorWebhook(webhookId!) || !store.destination(destinationId!)) await state.remove(key);
    }
  }
}
