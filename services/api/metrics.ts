import type { Code } from "@hookpost/contract";
import { Code as Codes } from "@hookpost/contract";
import { type GrpcListenerStats, liveCounter, liveGauge } from "@hookpost/core";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { PublishOutcome } from "./calls/publish.js";
import type { QuotaLimit } from "./calls/quota.js";
import type { HttpConnectionStats } from "./http/connection-guard.js";
import type { SyncLimiter } from "./sync/sync-limiter.js";

/** How a request reached ingest (a label of metrics and a field of logs). */
export type Transport = "grpc" | "http";

/** Prometheus metrics of one ingest instance (its own registry, so tests can run several). */
export class IngestMetrics {
  readonly registry = new Registry();
  readonly #calls: Counter<"transport" | "method" | "code">;
  readonly #callSeconds: Histogram<"transport" | "method">;
  readonly #events: Counter<"type" | "outcome">;
  readonly #publishSeconds: Histogram<"outcome">;
  readonly #natsConnected: Gauge;
  readonly #quotaRefused: Counter<"limit">;
  readonly #auditOutcomesLost: Counter;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.#calls = new Counter({
      name: "hookpost_ingest_calls_total",
      help: "Requests answered, by transport (grpc, http), method (gRPC method or HTTP path) and status code",
      labelNames: ["transport", "method", "code"],
      registers,
    });
    this.#callSeconds = new Histogram({
      name: "hookpost_ingest_call_duration_seconds",
      help: "Time to answer a request, by transport and method",
      labelNames: ["transport", "method"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.#events = new Counter({
      name: "hookpost_ingest_events_total",
      help: "Analytics calls published to JetStream, by call type and outcome",
      labelNames: ["type", "outcome"],
      registers,
    });
    this.#publishSeconds = new Histogram({
      name: "hookpost_ingest_publish_duration_seconds",
      help: "Time until JetStream confirmed (or refused) one call",
      labelNames: ["outcome"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers,
    });
    this.#natsConnected = new Gauge({
      name: "hookpost_ingest_nats_connected",
      help: "1 while the NATS connection is up",
      registers,
    });
    this.#quotaRefused = new Counter({
      name: "hookpost_ingest_quota_refused_total",
      help: "Requests refused (429 / RESOURCE_EXHAUSTED) because their source was over a quota: pending_bytes, rate, users (new users of a source at SOURCE_MAX_USERS)",
      labelNames: ["limit"],
      registers,
    });
    this.#auditOutcomesLost = new Counter({
      name: "hookpost_audit_outcomes_lost_total",
      help: "Admin writes whose outcome could not be added to the audit log after retries (their record shows outcome unknown)",
      registers,
    });
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** Exposes the gRPC port's connection counters (read at each scrape). */
  watchConnections(stats: GrpcListenerStats): void {
    this.#watchPort(
      "grpc",
      () => stats.open,
      "gRPC connections closed or refused by a limit: handshake_timeout, max_connections, ping_strikes",
      () => ({
        handshake_timeout: stats.handshakeTimeouts,
        max_connections: stats.refused,
        ping_strikes: stats.pingStrikeouts,
      }),
    );
  }

  /** Exposes the HTTP port's connection counters (read at each scrape). */
  watchHttpConnections(stats: HttpConnectionStats): void {
    this.#watchPort(
      "http",
      () => stats.open,
      "HTTP connections closed or refused by a limit: per_ip, shed (slowest closed at the cap), max_connections, timeout",
      () => stats.closed,
    );
  }

  /** A port's open connections, and those closed by a limit by reason: the same pair for both ports. */
  #watchPort(
    port: "grpc" | "http",
    open: () => number,
    closedHelp: string,
    closed: () => Record<string, number>,
  ): void {
    const name = `hookpost_ingest_${port}_connections`;
    liveGauge(
      this.registry,
      name,
      `TCP connections open on the ${port === "grpc" ? "gRPC" : "HTTP"} port`,
      open,
    );
    liveCounter(this.registry, `${name}_closed_total`, closedHelp, "reason", closed);
  }

  /** Exposes the running and refused syncs (read at each scrape). */
  watchSyncs(limiter: SyncLimiter): void {
    liveGauge(
      this.registry,
      "hookpost_ingest_syncs_running",
      "SyncAudience and SyncComputedTrait streams running",
      () => limiter.running,
    );
    liveCounter(
      this.registry,
      "hookpost_ingest_syncs_refused_total",
      "Syncs refused with RESOURCE_EXHAUSTED, by limit: process, source, memory",
      "limit",
      () => limiter.refused,
    );
  }

  callEnded(transport: Transport, method: string, code: Code, ms: number): void {
    this.#calls.inc({ transport, method, code: Codes[code] ?? String(code) });
    this.#callSeconds.observe({ transport, method }, ms / 1000);
  }

  published(type: string, outcome: PublishOutcome, ms: number): void {
    this.#events.inc({ type, outcome });
    this.#publishSeconds.observe({ outcome }, ms / 1000);
  }

  quotaRefused(limit: QuotaLimit): void {
    this.#quotaRefused.inc({ limit });
  }

  auditOutcomeLost(): void {
    this.#auditOutcomesLost.inc();
  }

  natsConnected(up: boolean): void {
    this.#natsConnected.set(up ? 1 : 0);
  }
}
