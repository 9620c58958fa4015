import type { PipelinedPublisher } from "@hookpost/core";
import { FIRST_TIME_HEADER, laneSubject, MapHeaders } from "@hookpost/core";
import type { JsMsg, MsgHdrs } from "nats";

/**
 * Parking (docs/design/delivery-at-scale.md §1-2): a delivery that cannot go now (a retry, a
 * paused destination, an open breaker, no free slot) is moved to its destination's lane, with
 * what the next attempt needs in headers, and acked where it was only once the lane stored it.
 * A crash in between leaves it where it was; parked again, it is stored once (same Nats-Msg-Id).
 */
export const ATTEMPTS_HEADER = "Hookpost-Attempts";
/** Not to be attempted before this (ms since the epoch). */
export const DUE_HEADER = "Hookpost-Due";
/**
 * A member of a batch that failed and is retried as a unit: `<key>;<index>;<size>` (batches.ts
 * forms the batch again from its members, in order, under the same key).
 */
export const BATCH_HEADER = "Hookpost-Batch";
/** The delivery's own id, without the park count (the base of each park's Nats-Msg-Id). */
export const DELIVERY_ID_HEADER = "Hookpost-Delivery-Id";
const NATS_MSG_ID = "Nats-Msg-Id";
/** Set by the server on stored messages; never copied into a new one. */
const SERVER_HEADERS = new Set([
  NATS_MSG_ID,
  DELIVERY_ID_HEADER,
  ATTEMPTS_HEADER,
  FIRST_TIME_HEADER,
  DUE_HEADER,
]);

/** What a delivery has been through, read from its message. */
export interface DeliveryState {
  /** Attempts made before this one. */
  attempts: number;
  /** When the delivery was first stored (ms). */
  firstTimeMs: number;
  /** Not before (ms); 0: now. */
  dueMs: number;
}

/** What parking needs of a message: a pulled one (JsMsg) or one read from the stream. */
export interface Parkable {
  data: Uint8Array;
  headers?: MsgHdrs | undefined;
  seq: number;
}

export function deliveryState(msg: JsMsg): DeliveryState {
  return stateOf(msg.headers, msg.info.timestampNanos / 1e6);
}

/** The state in a delivery's headers; `storedMs`: when its message was stored. */
export function stateOf(h: MsgHdrs | undefined, storedMs: number): DeliveryState {
  const num = (name: string) => {
    const v = Number(h?.get(name));
    return Number.isFinite(v) && v > 0 ? v : 0;
  };
  return {
    attempts: num(ATTEMPTS_HEADER),
    firstTimeMs: num(FIRST_TIME_HEADER) || storedMs,
    dueMs: num(DUE_HEADER),
  };
}

export class Parking {
  readonly #pipe: PipelinedPublisher;
  /** Told after each park: the lane needs its consumer (lanes.ts). */
  onParked: ((destinationId: string) => void) | undefined;

  constructor(pipe: PipelinedPublisher) {
    this.#pipe = pipe;
  }

  /**
   * Stores the delivery on its lane with `attempts` made so far, due at `dueMs`; resolves once
   * stored (the caller then acks the original). Rejects when the lane refused it (DELIVERIES
   * full, NATS away): the caller leaves the message where it is.
   */
  async park(
    destinationId: string,
    msg: Parkable,
    attempts: number,
    dueMs: number,
    state: DeliveryState,
    batch?: string,
  ): Promise<void> {
    const h = new MapHeaders();
    const from = msg.headers;
    if (from) {
      for (const k of from.keys()) if (!SERVER_HEADERS.has(k)) for (const v of from.values(k)) h.append(k, v);
    }
    const base = from?.get(DELIVERY_ID_HEADER) || from?.get(NATS_MSG_ID) || `${destinationId}:${msg.seq}`;
    h.set(DELIVERY_ID_HEADER, base);
    h.set(NATS_MSG_ID, `${base}~${attempts}`);
    h.set(ATTEMPTS_HEADER, String(attempts));
    h.set(FIRST_TIME_HEADER, String(Math.round(state.firstTimeMs)));
    if (dueMs > 0) h.set(DUE_HEADER, String(Math.round(dueMs)));
    if (batch !== undefined) h.set(BATCH_HEADER, batch);
    await this.#pipe.publish(laneSubject(destinationId), msg.data, h as MsgHdrs);
    this.onParked?.(destinationId);
  }
}
