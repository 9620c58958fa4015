import { partitionCount } from "@hookpost/core";
import type { DispatcherConfig } from "./config.js";
import { DeadLetterShares } from "./dead-letter-shares.js";
import type { CoreDeps } from "./delivery-core.js";
import { Janitor } from "./janitor.js";
import { Periodic } from "./periodic.js";
import { StrandedRescue } from "./stranded.js";

const JANITOR_INTERVAL_MS = 60_000;

/**
 * Periodic checks: the janitor (expired and orphaned deliveries), each source's share of DEAD,
 * the stranded-consumer check.
 */
export function startHousekeeping(config: DispatcherConfig, deps: CoreDeps): { stop(): Promise<void> } {
  const { conns, core, metrics, logger } = deps;
  // Often enough that a disabled destination's expired backlog is recorded well before max-age.
  const janitorIntervalMs = Math.min(
    JANITOR_INTERVAL_MS,
    Math.max(500, Math.floor(config.topology.retryWindowMs / 4)),
  );
  const janitor = new Janitor({
    jsm: conns.jsm,
    store: conns.store,
    deadLetters: conns.deadLetters,
    attemptLog: core.attemptLog,
    retryWindowMs: config.topology.retryWindowMs,
    logger,
    parking: core.parking,
  });
  const janitorRuns = new Periodic(() => janitor.run(), janitorIntervalMs, logger, "janitor run failed");
  janitorRuns.start(Math.min(5000, janitorIntervalMs));
  const shares = new DeadLetterShares({
    jsm: conns.jsm,
    store: conns.store,
    logger,
    maxBytesPerSource: config.deadLetterSourceMaxBytes,
    replicas: conns.registry,
    onDropped: (n) => metrics.deadLettersDropped.inc(n),
  });
  const shareRuns = new Periodic(
    () => shares.run(),
    janitorIntervalMs,
    logger,
    "dead letter shares run failed",
  );
  shareRuns.start(Math.min(5000, janitorIntervalMs));
  const stopNudges = conns.deadLetters.onRecorded(() => shares.nudge());
  const stranded = new StrandedRescue({
    js: conns.js,
    jsm: conns.jsm,
    logger,
    partitions: partitionCount(config.deliveryPartitions),
    consumer: core.consumer,
    intervalMs: config.strandedCheckMs,
    onRecreated: () => metrics.stranded.inc({ consumer: "partition" }),
  });
  const strandedRuns = new Periodic(
    () => stranded.run(),
    config.strandedCheckMs,
    logger,
    "stranded check failed",
  );
  strandedRuns.start();
  return {
    stop: async () => {
      stopNudges();
      // Told first: a trim under way stops at its next chunk instead of the periodic run's end.
      const sharesStopped = shares.stop();
      await janitorRuns.stop();
      await shareRuns.stop();
      await sharesStopped;
      await strandedRuns.stop();
    },
  };
}
