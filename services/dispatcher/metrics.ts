import { setTimeout as sleep } from "node:timers/promises";
import { registerStreamFull } from "@hookpost/core";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * How long a scrape waits for the backlog. While NATS is away every consumer lookup waits for its
 * request timeout (5 s each, one destination after the other): the rest of /metrics must not.
 */
const BACKLOG_TIMEOUT_MS = 2000;

const DELIVERY_OUTCOMES = ["delivered", "retry", "dead_letter", "handed_back"];
const RESULT_CLASSES = ["2xx", "3xx", "4xx", "5xx", "timeout", "connection", "tls", "ssrf", "invalid"];
/** The seconds histograms' buckets, 5 ms to 10 s (as long as a webhook may take). */
const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Prometheus metrics of one dispatcher (own registry, so several can live in one process). */
export class DispatcherMetrics {
  readonly registry = new Registry();

  /** Events taken off EVENTS, by what the router did with them. */
  readonly routed = this.#counter(
    "hookpost_dispatcher_events_routed_total",
    "Events handled by the router, by outcome (routed, no_destination, filtered, invalid, backpressure)",
    ["outcome"],
  );

  /** Deliveries (one per event and destination), by final or intermediate outcome. */
  readonly deliveries = this.#counter(
    "hookpost_dispatcher_deliveries_total",
    "Delivery attempts by destination and outcome (delivered, retry, dead_letter, handed_back)",
    ["destination", "outcome"],
  );

  readonly attemptSeconds = this.#seconds(
    "hookpost_dispatcher_attempt_seconds",
    "Latency of one webhook request, by destination and result (2xx, 3xx, 4xx, 5xx, timeout, connection, tls, ssrf, invalid)",
    ["destination", "result"],
  );

  readonly retries = this.#counter(
    "hookpost_dispatcher_retries_total",
    "Deliveries scheduled for another attempt",
  );

  /** Router's own first attempts (docs/design/delivery-at-scale.md §6): ended, or handed back to DELIVERIES. */
  readonly direct = this.#counter(
    "hookpost_dispatcher_direct_total",
    "First attempts the router made itself to destinations that answer fast, by how they ended (done: delivered, parked for a retry or dead-lettered; handed_back: stored on DELIVERIES instead)",
    ["outcome"],
  );

  readonly deadLetters = this.#counter("hookpost_dispatcher_dead_letters_total", "Deliveries dead-lettered", [
    "cause",
  ]);

  /** Dead letters dropped because their source was over its share of DEAD (SOURCE_MAX_DEAD_LETTER_BYTES). */
  readonly deadLettersDropped = this.#counter(
    "hookpost_dispatcher_dead_letters_dropped_total",
    "Dead letters dropped, oldest first, because their source's destinations had more than SOURCE_MAX_DEAD_LETTER_BYTES on DEAD",
  );

  /** Destinations Hookpost paused (auto-disable), by cause (gone: 410; failing: AUTO_DISABLE_AFTER). */
  readonly autoDisabled = this.#counter(
    "hookpost_dispatcher_auto_disabled_total",
    "Destinations paused automatically, by cause (gone: 410 Gone; failing: every attempt failed for AUTO_DISABLE_AFTER)",
    ["cause"],
  );

  /** Deliveries stored again, or consumers created again, because a consumer no longer counted what its subjects store (a nats-server fault). */
  readonly stranded = this.#counter(
    "hookpost_dispatcher_stranded_recreated_total",
    "Stranded-delivery recoveries: deliveries stored again, or consumers deleted and created again, because a consumer no longer counted messages its subjects store (partition or lane)",
    ["consumer"],
  );

  readonly attemptLogDropped = this.#counter(
    "hookpost_dispatcher_attempt_log_dropped_total",
    "Attempt-log records not written (too many awaiting their ack, or the publish failed)",
    ["why"],
  );

  readonly backlog: Gauge<"destination">;

  /**
   * Age of the oldest pending call of the destinations with the oldest ones (at most
   * OLDEST_PENDING_SERIES series, so 10 000 destinations never make 10 000 series), set by the
   * replica that watches destinations for operational webhooks (operator-webhooks/), on every check.
   */
  readonly oldestPending = new Gauge({
    name: "hookpost_dispatcher_oldest_pending_seconds",
    help: "Age of the oldest call not yet delivered or dead-lettered, for the destinations with the oldest ones (at most 50 series; set by one replica)",
    labelNames: ["destination"] as const,
    registers: [this.registry],
  });

  /** How long one check of the watcher of destinations took (operator-webhooks/monitor.ts). */
  readonly alertCheckSeconds = this.#seconds(
    "hookpost_dispatcher_alert_check_seconds",
    "Duration of one check of every destination for the operational webhooks (only the replica that watches checks)",
  );

  /** Operational events stored for delivery to operator webhooks, by type (one per webhook). */
  readonly operatorEvents = this.#counter(
    "hookpost_dispatcher_operator_events_total",
    "Operational events stored for delivery to an operator webhook, by type (destination.failing, destination.recovered, destination.disabled, destination.behind, dead_letter.created)",
    ["type"],
  );

  /** Destinations paused by Hookpost now (auto-disable), counted from the configuration at each scrape. */
  countAutoDisabled(count: () => number): void {
    new Gauge({
      name: "hookpost_dispatcher_destinations_auto_disabled",
      help: "Destinations paused by Hookpost (410 Gone, or failing for AUTO_DISABLE_AFTER) and not enabled again",
      registers: [this.registry],
      collect() {
        this.set(count());
      },
    });
  }

  /** Series of a deleted destination go, so the label stays bounded by the live destinations. */
  forgetDestination(id: string): void {
    for (const outcome of DELIVERY_OUTCOMES) this.deliveries.remove({ destination: id, outcome });
    for (const result of RESULT_CLASSES) this.attemptSeconds.remove({ destination: id, result });
  }

  /** `backlog` is read from JetStream on scrape. */
  constructor(backlog: () => Promise<Map<string, number>>) {
    collectDefaultMetrics({ register: this.registry });
    // DELIVERIES refusing the router's fan-out is counted here (hookpost_stream_full_total).
    registerStreamFull(this.registry);
    // One lookup at a time: scrapes during an outage share the slow one rather than pile up.
    let pending: Promise<Map<string, number> | undefined> | undefined;
    this.backlog = new Gauge({
      name: "hookpost_dispatcher_consumer_backlog",
      help: "Deliveries not yet acknowledged per destination (waiting, in flight, or waiting for a retry)",
      labelNames: ["destination"] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        pending ??= backlog()
          .catch(() => undefined)
          .finally(() => {
            pending = undefined;
          });
        // Not known in time (NATS away): no backlog series in this scrape, rather than no scrape.
        const known = await Promise.race([pending, sleep(BACKLOG_TIMEOUT_MS, undefined, { ref: false })]);
        for (const [id, n] of known ?? []) this.set({ destination: id }, n);
      },
    });
  }

  /** A counter on this registry: every dispatcher counter is declared alike. */
  #counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** A seconds histogram on this registry (SECONDS_BUCKETS). */
  #seconds<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
  ): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets: SECONDS_BUCKETS, registers: [this.registry] });
  }
}
