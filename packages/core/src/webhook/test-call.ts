import { headers, type JetStreamClient } from "nats";
import {
  MESSAGE_ID_HEADER,
  SOURCE_ID_HEADER,
  setCallHeaders,
  USER_HASH_HEADER,
} from "../dead-letters/delivery-headers.js";
import { partitionSubject } from "../nats/topology.js";
import { erasable, userHash } from "../users/user-hash.js";

/**
 * Marks a delivery as a test call (AdminService.SendTestCall, docs/design/shaping.md section 8):
 * the dispatcher sends it once, now, whatever the destination's state (paused, breaker open, rate),
 * records the attempt and acknowledges it: never retried, never dead-lettered, never counted
 * towards auto-disable.
 */
export const TEST_CALL_HEADER = "Hookpost-Test-Call";

/** Stores one test call's webhook body for one destination on DELIVERIES (partition 0 reaches every replica). */
export async function publishTestCall(
  js: JetStreamClient,
  call: {
    destinationId: string;
    messageId: string;
    sourceId: string;
    body: string;
    /** The synthetic call: its user, type and event go with its records as a routed call's do. */
    call: { type?: string; event?: string; userId?: string; anonymousId?: string };
  },
): Promise<void> {
  const h = headers();
  h.set(MESSAGE_ID_HEADER, call.messageId);
  h.set(SOURCE_ID_HEADER, call.sourceId);
  h.set(TEST_CALL_HEADER, "1");
  // A test call may name a real user: its records are erased (and searched) with theirs.
  if (erasable(call.call)) h.set(USER_HASH_HEADER, userHash(call.call));
  setCallHeaders(h, call.call);
  await js.publish(partitionSubject(0, call.destinationId), call.body, {
    msgID: `test:${call.destinationId}:${call.messageId}`,
    headers: h,
  });
}
