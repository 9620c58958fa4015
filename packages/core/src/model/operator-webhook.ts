import type { OperatorEventType } from "@hookpost/contract";
import { OPERATOR_TARGET_PREFIX } from "../nats/topology.js";
import type { DestinationRecord } from "./destination.js";

/** An operator webhook as stored in the configuration bucket (docs/api.md#operational-webhooks). */
export interface OperatorWebhookRecord {
  id: string;
  name: string;
  url: string;
  /** The Standard Webhooks secret (`whsec_…`) that signs every event. Never returned by the admin API. */
  secret: string;
  /** Types sent; empty: every type. */
  eventTypes: OperatorEventType[];
  /** Disabled: no new events are stored for it. */
  enabled: boolean;
  /** Absent: DEFAULT_FAILING_BELOW. */
  failingBelow?: number;
  /** Absent: DEFAULT_BEHIND_AFTER_MS. */
  behindAfterMs?: number;
  createdAt: string;
  updatedAt: string;
}

/** The destination id under which a webhook's events are delivered, recorded and dead-lettered. */
export const operatorTargetId = (webhookId: string) => `${OPERATOR_TARGET_PREFIX}${webhookId}`;

/** A delivery target that is an operator webhook, not a customer's destination. */
export const isOperatorTarget = (destinationId: string) => destinationId.startsWith(OPERATOR_TARGET_PREFIX);

/** Whether the webhook takes events of this type. */
export function wantsEvent(w: OperatorWebhookRecord, type: OperatorEventType): boolean {
  return w.enabled && (w.eventTypes.length === 0 || w.eventTypes.includes(type));
}

/**
 * The webhook as the delivery core sees it: a destination without sources, one URL, Standard
 * Webhooks signing with its secret, the server's retry schedule. So an operational event is
 * delivered by the very path of customer webhooks (partitions, lanes, retries, SSRF guard,
 * timeouts, breaker, attempt log, dead letters). Always enabled: disabling the webhook stops new
 * events, and what is stored already still goes out.
 */
export function operatorTarget(w: OperatorWebhookRecord): DestinationRecord {
  return {
    id: operatorTargetId(w.id),
    name: `operator webhook ${w.name}`,
    sourceIds: [],
    urls: [w.url],
    headers: {},
    sharedSecret: w.secret,
    signing: "standard-webhooks",
    enabled: true,
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
  };
}
