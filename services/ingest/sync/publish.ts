import type { JetStreamClient, NatsConnection } from "nats";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import { natsFailure } from "../../../lib/nats/jetstream-errors.js";
import { eventSubject } from "../../../lib/nats/topology.js";
import type { PublishCall } from "./deps.js";

/**
 * The built-in publisher: one JetStream publish per call with `Nats-Msg-Id:
 * <sourceId>:<messageId>`, so that a repeated message id inside the dedup window is stored once.
 */
export function jetStreamPublisher(nc: NatsConnection, timeoutMs = 5_000): PublishCall {
  const js: JetStreamClient = nc.jetstream();
  return async (call: StoredCall) => {
    try {
      await js.publish(eventSubject(call.sourceId, call.type), JSON.stringify(call), {
        msgID: `${call.sourceId}:${call.messageId}`,
        timeout: timeoutMs,
      });
    } catch (err) {
      throw natsFailure("could not store the call", err);
    }
  };
}
