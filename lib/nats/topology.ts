import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamManager,
  nanos,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "nats";
import { ATTEMPT_SUBJECTS, ATTEMPTS_STREAM } from "../attempts/record.js";

/**
 * Every JetStream name Hookpost uses, in one place. Data flows one way:
 *   ingest --publish--> EVENTS --router--> DELIVERIES (one subject per destination) --> webhook
 *                                                                      \--> DEAD (dead letters)
 * and, beside the flow, ATTEMPTS: the attempt log (lib/attempts), written without waiting.
 */
export const EVENTS_STREAM = "HOOKPOST_EVENTS";
export const DELIVERIES_STREAM = "HOOKPOST_DELIVERIES";
export const DEAD_STREAM = "HOOKPOST_DEAD";
export const CONFIG_BUCKET = "hookpost_config";
/** The durable consumer on EVENTS that fans each call out to its destinations. */
export const ROUTER_CONSUMER = "router";

export type EventType = "identify" | "track" | "page" | "screen" | "group" | "alias" | "delete";

export const eventSubject = (sourceId: string, type: EventType) => `hookpost.events.${sourceId}.${type}`;
export const deliverySubject = (destinationId: string) => `hookpost.deliveries.${destinationId}`;
export const deadSubject = (destinationId: string) => `hookpost.dead.${destinationId}`;
/** Durable consumer name of one destination on DELIVERIES. */
export const destinationConsumer = (destinationId: string) => `dest_${destinationId}`;

/** Ids become subject tokens and consumer names: keep them to this alphabet. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export interface TopologySettings {
  /** How long a delivery is retried (RETRY_WINDOW). */
  retryWindowMs: number;
  /** Longest delay between two attempts (RETRY_MAX_DELAY). */
  retryMaxDelayMs: number;
  /** EVENTS size limit; when full, new calls are refused (DiscardNew). */
  eventsMaxBytes: number;
  /** DELIVERIES size limit; when full, routing waits and EVENTS fills up behind it. */
  deliveriesMaxBytes: number;
  /** How long dead letters are kept. */
  deadLetterMaxAgeMs: number;
  /** Window in which a repeated message id is stored once. */
  dedupWindowMs: number;
  /** Stream replicas (1 for a single server, 3 for a cluster). */
  replicas: number;
  /** How long the attempt log keeps records (ATTEMPT_LOG_MAX_AGE). */
  attemptLogMaxAgeMs: number;
  /** Attempt log size limit; the oldest records go first (ATTEMPT_LOG_MAX_BYTES). */
  attemptLogMaxBytes: number;
}

export const DEFAULT_TOPOLOGY: TopologySettings = {
  retryWindowMs: 4 * 3_600_000,
  retryMaxDelayMs: 15 * 60_000,
  eventsMaxBytes: 1024 ** 3,
  deliveriesMaxBytes: 1024 ** 3,
  deadLetterMaxAgeMs: 14 * 86_400_000,
  dedupWindowMs: 10 * 60_000,
  replicas: 1,
  attemptLogMaxAgeMs: 3 * 86_400_000,
  attemptLogMaxBytes: 1024 ** 3,
};

/**
 * DELIVERIES keeps a message at most this long. The dispatcher dead-letters at the retry
 * window; max-age is the backstop that only acts when no dispatcher ran for that long.
 */
export function deliveriesMaxAgeMs(s: TopologySettings): number {
  return 2 * s.retryWindowMs + s.retryMaxDelayMs;
}

function streamConfigs(s: TopologySettings): Partial<StreamConfig>[] {
  return [
    {
      name: EVENTS_STREAM,
      subjects: ["hookpost.events.>"],
      // Work queue: a call leaves the stream once the router has fanned it out.
      retention: RetentionPolicy.Workqueue,
      discard: DiscardPolicy.New,
      max_bytes: s.eventsMaxBytes,
      duplicate_window: nanos(s.dedupWindowMs),
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: DELIVERIES_STREAM,
      subjects: ["hookpost.deliveries.>"],
      retention: RetentionPolicy.Workqueue,
      discard: DiscardPolicy.New,
      max_bytes: s.deliveriesMaxBytes,
      max_age: nanos(deliveriesMaxAgeMs(s)),
      duplicate_window: nanos(Math.min(s.dedupWindowMs, deliveriesMaxAgeMs(s))),
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: DEAD_STREAM,
      subjects: ["hookpost.dead.>"],
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_age: nanos(s.deadLetterMaxAgeMs),
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: ATTEMPTS_STREAM,
      subjects: ATTEMPT_SUBJECTS,
      retention: RetentionPolicy.Limits,
      // A log: when full, the oldest records make room; a delivery is never refused for it.
      discard: DiscardPolicy.Old,
      max_age: nanos(s.attemptLogMaxAgeMs),
      max_bytes: s.attemptLogMaxBytes,
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
  ];
}

/** Creates or updates the streams and the router consumer; safe to run from every replica at once. */
export async function ensureTopology(jsm: JetStreamManager, s: TopologySettings): Promise<void> {
  for (const cfg of streamConfigs(s)) {
    try {
      const info = await jsm.streams.info(cfg.name!);
      const merged = { ...info.config, ...cfg };
      if (JSON.stringify(merged) !== JSON.stringify(info.config)) await jsm.streams.update(cfg.name!, merged);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await jsm.streams.add(cfg);
      } catch (addErr) {
        // Another replica created it between our info and add.
        if (!String((addErr as Error).message).includes("already in use")) throw addErr;
      }
    }
  }
  await jsm.consumers.add(EVENTS_STREAM, {
    durable_name: ROUTER_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_ack_pending: 10_000,
  });
}

export function isNotFound(err: unknown): boolean {
  const e = err as { code?: string | number; api_error?: { err_code?: number }; message?: string };
  return (
    e?.api_error?.err_code === 10059 || // stream not found
    e?.api_error?.err_code === 10014 || // consumer not found
    e?.code === "404" ||
    /not found/i.test(e?.message ?? "")
  );
}
