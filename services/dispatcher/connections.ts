import { setTimeout as sleep } from "node:timers/promises";
import {
  AckReplay,
  ConfigStore,
  ConnectionState,
  connectNats,
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  DeadLetters,
  destinationOfSubject,
  ensureTopology,
  type Keyring,
  LANE_SUBJECT_PREFIX,
  type Logger,
  PipelinedPublisher,
  SecretsKeyError,
  type TopologySettings,
} from "@hookpost/core";
import type { JetStreamClient, JetStreamManager, NatsConnection } from "nats";
import { ReplicaRegistry } from "./replica-registry.js";

/** How long a fan-out publish waits for its PubAck (nats.js's default). */
const PUBLISH_TIMEOUT_MS = 5_000;
/** How long one ack confirmation waits before the ack is sent again (confirmed-ack.ts). */
const ACK_CONFIRM_TIMEOUT_MS = 2_000;

/** A replica's NATS connection, its publishers and the stores it reads. */
export interface Connections {
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  readonly js: JetStreamClient;
  readonly connection: ConnectionState;
  /** Fan-out publishes and attempt-log records: one inbox, writes batched per turn. */
  readonly pipe: PipelinedPublisher;
  /** Acks, naks and progress notes. */
  readonly acks: PipelinedPublisher;
  /** Confirmed acks, sent again when a consumer elects a new leader. */
  readonly ackReplay: AckReplay;
  readonly store: ConfigStore;
  readonly deadLetters: DeadLetters;
  readonly registry: ReplicaRegistry;
}

/** Connects to NATS (waiting until it is up), opens the stores and the publishers. */
export async function openConnections(
  settings: {
    natsUrl: string;
    topology: TopologySettings;
    keyring?: Keyring | undefined;
    deadLetterBodies?: boolean;
  },
  logger: Logger,
): Promise<Connections> {
  const nc = await connectNats(settings.natsUrl, "hookpost-dispatcher", logger);
  const jsm = await nc.jetstreamManager();
  const { store, deadLetters, registry } = await openStores(nc, jsm, settings, logger).catch(
    async (err: unknown) => {
      await nc.close().catch(() => {});
      throw err;
    },
  );
  const connection = new ConnectionState(nc);
  connection.onChange((up) =>
    up
      ? logger.info("NATS connection is back")
      : logger.warn("NATS connection lost: not ready until it is back"),
  );
  const js = nc.jetstream();
  const pipe = new PipelinedPublisher(nc, PUBLISH_TIMEOUT_MS);
  // Acks have their own, with a shorter wait: an ack lost to a consumer leader's election is
  // resent after 2 s, well inside ack-wait, so the message is not delivered a second time.
  const acks = new PipelinedPublisher(nc, ACK_CONFIRM_TIMEOUT_MS);
  const ackReplay = new AckReplay(nc, acks, logger);
  return { nc, jsm, js, connection, pipe, acks, ackReplay, store, deadLetters, registry };
}

/** Closes the stores: the registry first (this replica leaves), then the configuration's watch. */
export async function closeStores(c: Connections): Promise<void> {
  await c.registry.close();
  c.store.close();
}

/** Drains the connection, then closes the publishers. */
export async function drainConnections(c: Connections): Promise<void> {
  // Writes queued in this turn (the last acks and naks) go out before the drain.
  await new Promise((resolve) => setImmediate(resolve));
  await c.nc.drain().catch(() => {});
  c.ackReplay.close();
  c.pipe.close();
  c.acks.close();
}

/** The backlog per destination, read from JetStream at each scrape (hookpost_dispatcher_consumer_backlog). */
export function backlogOf(
  c: Pick<Connections, "connection" | "jsm" | "store">,
): () => Promise<Map<string, number>> {
  const { connection, jsm, store } = c;
  return async () => {
    const out = new Map<string, number>();
    // While NATS is away the lookups could only time out: report nothing rather than stall scrapes.
    if (!connection.connected) return out;
    // Two stream infos, whatever the number of destinations: subjects holding messages, with counts.
    for (const filter of [`${DELIVERY_SUBJECT_PREFIX}>`, `${LANE_SUBJECT_PREFIX}>`]) {
      const info = await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
      for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
        const id = destinationOfSubject(subject);
        if (id !== undefined && store.destination(id)) out.set(id, (out.get(id) ?? 0) + n);
      }
    }
    // Every destination has a series, 0 when nothing waits (only subjects holding messages are listed).
    for (const dest of store.destinations()) if (!out.has(dest.id)) out.set(dest.id, 0);
    return out;
  };
}

/** The stores a replica needs; JetStream can lag the server's start (or a cluster may be electing): keeps trying. */
async function openStores(
  nc: NatsConnection,
  jsm: JetStreamManager,
  settings: { topology: TopologySettings; keyring?: Keyring | undefined; deadLetterBodies?: boolean },
  logger: Logger,
): Promise<{ store: ConfigStore; deadLetters: DeadLetters; registry: ReplicaRegistry }> {
  const { topology, keyring } = settings;
  const deadLetterBodies = settings.deadLetterBodies ?? true;
  let registry: ReplicaRegistry | undefined;
  for (let i = 1; ; i++) {
    try {
      await ensureTopology(jsm, topology);
      const deadLetters = await DeadLetters.open(nc, { bodies: deadLetterBodies });
      // Opened once: it heartbeats from then on.
      registry ??= await ReplicaRegistry.open(nc, { replicas: topology.replicas, logger });
      // Last: once open it watches, so a failure after it would leave a watcher behind.
      // operatorTargets: operator webhooks are delivered as destinations (operator-webhooks/).
      const store = await ConfigStore.open(nc, {
        replicas: topology.replicas,
        keyring,
        operatorTargets: true,
      });
      return { store, deadLetters, registry };
    } catch (err) {
      // Keys that do not open the stored secrets: waiting will not help.
      if (err instanceof SecretsKeyError) {
        await registry?.close();
        throw err;
      }
      logger.warn({ attempt: i, err: (err as Error).message }, "JetStream not ready; retrying");
      await sleep(Math.min(5000, 250 * i));
    }
  }
}
