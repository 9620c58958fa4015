import {
  DELIVERIES_STREAM,
  deleteMessages,
  destinationSubjects,
  isAlreadyExists,
  isNotFound,
  laneConsumer,
  laneSubject,
  legacyDestinationConsumer,
  partitionConsumer,
  partitionFilter,
} from "@hookpost/core";
import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  type JetStreamManager,
  nanos,
  ReplayPolicy,
} from "nats";

export interface ConsumerSettings {
  ackWaitMs: number;
  /** A lane's unacked deliveries (in flight, or waiting for their due time). */
  maxAckPending: number;
}

/** Partitions never hold a retry, only work in flight: this bounds nothing that matters. */
const PARTITION_MAX_ACK_PENDING = 10_000;

function base(s: ConsumerSettings): Partial<ConsumerConfig> {
  return {
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
    // Retries are ours and end with a dead letter, never by a delivery cap.
    max_deliver: -1,
    ack_wait: nanos(s.ackWaitMs),
    max_waiting: 512,
  };
}

/** Shared-lane partition p: every destination's fresh deliveries whose id hashes to p. */
export function partitionConsumerConfig(p: number, s: ConsumerSettings): Partial<ConsumerConfig> {
  return {
    ...base(s),
    durable_name: partitionConsumer(p),
    filter_subject: partitionFilter(p),
    max_ack_pending: PARTITION_MAX_ACK_PENDING,
  };
}

/**
 * A destination's lane. Deliveries waiting for their due time are naked with the delay and count
 * toward its own max_ack_pending: a dead endpoint fills only its own lane.
 */
export function laneConsumerConfig(id: string, s: ConsumerSettings): Partial<ConsumerConfig> {
  return {
    ...base(s),
    durable_name: laneConsumer(id),
    filter_subject: laneSubject(id),
    max_ack_pending: s.maxAckPending,
  };
}

/** Creates or updates a consumer; every replica calls this, so it must be idempotent. */
export async function ensureConsumer(jsm: JetStreamManager, cfg: Partial<ConsumerConfig>): Promise<void> {
  try {
    await jsm.consumers.add(DELIVERIES_STREAM, cfg);
  } catch (err) {
    // Newer servers refuse a create that differs from the existing consumer: update it instead.
    if (!isAlreadyExists(err)) throw err;
    await jsm.consumers.update(DELIVERIES_STREAM, cfg.durable_name!, {
      ack_wait: cfg.ack_wait!,
      max_ack_pending: cfg.max_ack_pending!,
    });
  }
}

/** Deletes a consumer; one already gone is fine. */
export async function deleteConsumer(jsm: JetStreamManager, name: string): Promise<void> {
  try {
    await jsm.consumers.delete(DELIVERIES_STREAM, name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/**
 * Deletes a destination's lane (and a legacy consumer) and every pending delivery. Idempotent.
 * One by one, never a filtered purge: nats-server 2.9.10 replays that on a restarted replica as a
 * purge of every destination's deliveries (core's deleteMessages).
 */
export async function removeDestinationDeliveries(jsm: JetStreamManager, id: string): Promise<void> {
  await deleteConsumer(jsm, laneConsumer(id));
  await deleteConsumer(jsm, legacyDestinationConsumer(id));
  for (const filter of destinationSubjects(id)) await deleteMessages(jsm, DELIVERIES_STREAM, filter);
}
