import {
  DELIVERIES_STREAM,
  deliverySubject,
  destinationConsumer,
  isAlreadyExists,
  isNotFound,
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
  maxAckPending: number;
}

/**
 * One durable consumer per destination on DELIVERIES. Delayed naks (retries waiting for their
 * time) count toward max_ack_pending, so a dead endpoint fills only its own consumer's quota and
 * never stalls another destination.
 */
export function destinationConsumerConfig(id: string, s: ConsumerSettings): Partial<ConsumerConfig> {
  return {
    durable_name: destinationConsumer(id),
    filter_subject: deliverySubject(id),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
    // Retries are ours (nak with delay) and end with a dead letter, never by a delivery cap.
    max_deliver: -1,
    ack_wait: nanos(s.ackWaitMs),
    max_ack_pending: s.maxAckPending,
    max_waiting: 512,
  };
}

/** Creates or updates the consumer; every replica calls this, so it must be idempotent. */
export async function ensureDestinationConsumer(jsm: JetStreamManager, id: string, s: ConsumerSettings) {
  const cfg = destinationConsumerConfig(id, s);
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

/** Deletes a destination's consumer and purges its pending deliveries. Idempotent. */
export async function removeDestinationConsumer(jsm: JetStreamManager, id: string): Promise<void> {
  try {
    await jsm.consumers.delete(DELIVERIES_STREAM, destinationConsumer(id));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  await jsm.streams.purge(DELIVERIES_STREAM, { filter: deliverySubject(id) });
}
