import { setTimeout as sleep } from "node:timers/promises";
import {
  AuditLog,
  ConfigStore,
  DeadLetters,
  DeletionStore,
  ensureBucketLimits,
  ensureTopology,
  type Keyring,
  type Logger,
  MembershipStore,
  PortalLinkStore,
  SecretsKeyError,
  StreamWatch,
  type TopologySettings,
  UserSourceIndex,
} from "@hookpost/core";
import type { JetStreamManager, NatsConnection } from "nats";
import { DEFAULT_ERASURE, DEFAULT_STREAM_CHECK_MS } from "./config.js";
import type { IngestMetrics } from "./metrics.js";

/** What the API keeps in JetStream: the streams, the configuration and the other buckets. */
export interface Stores {
  readonly jsm: JetStreamManager;
  /** Sources and destinations, watched into memory. */
  readonly config: ConfigStore;
  readonly index: UserSourceIndex;
  readonly memberships: MembershipStore;
  readonly deadLetters: DeadLetters;
  /** The audit log of admin writes (append and read only). */
  readonly auditLog: AuditLog;
  /** Deletion requests: erasure's to-do list and GetDeletion's status. */
  readonly deletions: DeletionStore;
  /** Portal links (hashes of their tokens), read at every call made with one. */
  readonly portalLinks: PortalLinkStore;
  /** Resolves once the user index wrote its last counts: before NATS is drained. */
  close(): Promise<void>;
}

/**
 * Creates the streams and buckets (idempotently) and opens the stores, retrying while NATS or
 * JetStream is still starting; then watches the streams' bytes and limits (metrics, bucket limits).
 */
export async function openStores(
  nc: NatsConnection,
  settings: {
    topology: TopologySettings;
    streamCheckMs?: number;
    keyring?: Keyring | undefined;
    erasure?: { statusMaxAgeMs: number };
    /** SOURCE_MAX_USERS (the user index's part of the per-source quotas); absent: no limit. */
    maxUsersPerSource?: number | undefined;
  },
  deps: { metrics: IngestMetrics; log: Logger },
): Promise<Stores> {
  const { topology } = settings;
  const replicas = { replicas: topology.replicas };
  const statusMaxAgeMs = settings.erasure?.statusMaxAgeMs ?? DEFAULT_ERASURE.statusMaxAgeMs;
  const [config, index, memberships, deadLetters, auditLog, deletions, portalLinks] = await untilReady(
    deps.log,
    "create streams and load configuration",
    async () => {
      await ensureTopology(await nc.jetstreamManager(), topology);
      const opened = await Promise.all([
        ConfigStore.open(nc, { ...replicas, keyring: settings.keyring }),
        UserSourceIndex.open(nc, {
          ...replicas,
          maxUsersPerSource: settings.maxUsersPerSource,
          onQuotaRefused: () => deps.metrics.quotaRefused("users"),
        }),
        MembershipStore.open(nc, replicas),
        DeadLetters.open(nc),
        AuditLog.open(nc),
        DeletionStore.open(nc, { ...replicas, maxAgeMs: statusMaxAgeMs }),
        PortalLinkStore.open(nc, replicas),
      ]);
      // The stores create their buckets without a byte limit.
      await ensureBucketLimits(await nc.jetstreamManager(), topology);
      return opened;
    },
  );
  const jsm = await nc.jetstreamManager();
  const watch = new StreamWatch(jsm, topology, deps.log, settings.streamCheckMs ?? DEFAULT_STREAM_CHECK_MS);
  watch.register(deps.metrics.registry);
  watch.start();
  return {
    jsm,
    config,
    index,
    memberships,
    deadLetters,
    auditLog,
    deletions,
    portalLinks,
    close: async () => {
      watch.close();
      config.close();
      await index.close();
    },
  };
}

/**
 * A NATS server that came back without its store (no volume) has lost the streams: recreates
 * them, as at start. Idempotent when they are there.
 */
export async function recreateTopology(
  nc: NatsConnection,
  topology: TopologySettings,
  log: Logger,
): Promise<void> {
  try {
    await ensureTopology(await nc.jetstreamManager(), topology);
  } catch (err) {
    log.warn({ err: (err as Error).message }, "could not check the streams after reconnecting");
  }
}

/** Retries a start-up step until it succeeds (NATS or JetStream may still be starting). */
async function untilReady<T>(log: Logger, what: string, step: () => Promise<T>): Promise<T> {
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await step();
    } catch (err) {
      // Keys that do not open the stored secrets: waiting will not help.
      if (err instanceof SecretsKeyError) throw err;
      log.warn({ err: (err as Error).message, retryInMs: delay }, `cannot ${what} yet; retrying`);
      await sleep(delay);
    }
  }
}
