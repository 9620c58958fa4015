import type { StoredCall } from "@hookpost/contract";
import {
  countIfFull,
  EVENTS_STREAM,
  eventSubject,
  msgIdHeaders,
  natsFailure,
  PipelinedPublisher,
} from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { PublishCall } from "./deps.js";

/** One pipelined publisher per connection and timeout; its inbox closes with the connection. */
const publishers = new WeakMap<NatsConnection, Map<number, PipelinedPublisher>>();

function pipelined(nc: NatsConnection, timeoutMs: number): PipelinedPublisher {
  const byTimeout = publishers.get(nc) ?? new Map<number, PipelinedPublisher>();
  publishers.set(nc, byTimeout);
  let pipe = byTimeout.get(timeoutMs);
  if (!pipe || pipe.closed) {
    pipe = new PipelinedPublisher(nc, timeoutMs);
    byTimeout.set(timeoutMs, pipe);
  }
  return pipe;
}

/**
 * The built-in publisher: one JetStream publish per call with `Nats-Msg-Id:
 * <sourceId>:<messageId>`, so that a repeated message id inside the dedup window is stored once.
 * Pipelined: many calls in flight cost little each (see PipelinedPublisher).
 */
export function jetStreamPublisher(nc: NatsConnection, timeoutMs = 5_000): PublishCall {
  const pipe = pipelined(nc, timeoutMs);
  return (call: StoredCall, json?: string) =>
    pipe
      .publish(
        eventSubject(call.sourceId, call.type),
        json ?? JSON.stringify(call),
        msgIdHeaders(`${call.sourceId}:${call.messageId}`),
      )
      .then(stored, failed);
}

const stored = (): void => {};
const failed = (err: unknown): never => {
  countIfFull(EVENTS_STREAM, err);
  throw natsFailure("could not store the call", err);
};
