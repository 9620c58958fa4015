import type { AttemptLog, Logger, OperatorWebhookRecord } from "@hookpost/core";
import {
  countIfFull,
  DELIVERIES_STREAM,
  deliveryPartition,
  MESSAGE_ID_HEADER,
  operatorTargetId,
  partitionSubject,
  SOURCE_ID_HEADER,
} from "@hookpost/core";
import { headers, type JetStreamClient } from "nats";
import type { DispatcherMetrics } from "../metrics.js";
import type { OperatorEvent } from "./events.js";

export interface PublisherDeps {
  js: JetStreamClient;
  /** DELIVERY_PARTITIONS. */
  partitions: number;
  /** The delivery core's class of a destination (answering endpoints get the fast partitions). */
  answering: (destinationId: string) => boolean;
  attemptLog: AttemptLog;
  metrics: DispatcherMetrics;
  logger: Logger;
}

/**
 * Stores an operational event on DELIVERIES once per operator webhook, for the webhook's delivery
 * target (`_ops_<id>`): from there the delivery core carries it like any call (signing, SSRF
 * guard, timeouts, retries, lanes, breaker, attempt log, dead letters). The Nats-Msg-Id is the
 * event id and the target, so a second replica storing the same event within DEDUP_WINDOW is
 * dropped by JetStream. A routing record (with the body) makes `messages show <event id>` show it.
 */
export class OperatorEventPublisher {
  readonly #d: PublisherDeps;

  constructor(deps: PublisherDeps) {
    this.#d = deps;
  }

  /** True once stored for every webhook; false when a publish failed (the caller tries again later). */
  async emit(event: OperatorEvent, webhooks: readonly OperatorWebhookRecord[]): Promise<boolean> {
    const d = this.#d;
    if (webhooks.length === 0) return true;
    const targets = webhooks.map((w) => operatorTargetId(w.id));
    let acks: { duplicate: boolean }[];
    try {
      acks = await Promise.all(
        targets.map((target) => {
          const h = headers();
          h.set(MESSAGE_ID_HEADER, event.id);
          h.set(SOURCE_ID_HEADER, "");
          const p = deliveryPartition(target, event.id, d.partitions, d.answering(target));
          return d.js.publish(partitionSubject(p, target), event.body, {
            msgID: `ops:${target}:${event.id}`,
            headers: h,
          });
        }),
      );
    } catch (err) {
      countIfFull(DELIVERIES_STREAM, err);
      d.logger.warn(
        { eventId: event.id, type: event.type, err: (err as Error).message },
        "operational event not stored; trying again at the next check",
      );
      return false;
    }
    // Another replica stored it already (a hand-over): nothing more to record or count.
    const stored = acks.filter((a) => !a.duplicate).length;
    if (stored === 0) return true;
    const now = new Date().toISOString();
    d.attemptLog.routed({
      kind: "routed",
      messageId: event.id,
      sourceId: "",
      receivedAt: now,
      time: now,
      destinations: targets,
      filtered: false,
      body: event.body,
    });
    d.metrics.operatorEvents.inc({ type: event.type }, targets.length);
    d.logger.info(
      { eventId: event.id, type: event.type, webhooks: targets.length },
      "operational event stored",
    );
    return true;
  }
}
