/**
 * Headers every message on DELIVERIES carries. The router writes them, the dispatcher reads them,
 * and a dead-letter replay writes them again, so they live in one place.
 */
export const MESSAGE_ID_HEADER = "Hookpost-Message-Id";
export const SOURCE_ID_HEADER = "Hookpost-Source-Id";

/**
 * Nats-Msg-Id of the delivery of one call to one destination. A redelivered router message
 * publishes the same id again, and JetStream stores it once.
 */
export function deliveryMsgId(sourceId: string, messageId: string, destinationId: string): string {
  return `${sourceId}:${messageId}:${destinationId}`;
}
