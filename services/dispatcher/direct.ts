import {
  type AttemptRecord,
  DELIVERIES_STREAM,
  type DestinationRecord,
  type RecordFields,
} from "@hookpost/core";
import type { DeliveryInfo, JsMsg, MsgHdrs, PullOptions } from "nats";
import type { DeliveryState } from "./parking.js";

/**
 * The key a delivery's dead letter is stored once under: the stored delivery's DELIVERIES
 * sequence, or for a direct one its call's EVENTS sequence, apart (the two sequences overlap, and
 * a shared key would drop one of two dead letters as a duplicate).
 */
export function deadLetterKey(destinationId: string, msg: JsMsg): string {
  return msg instanceof DirectMsg ? `${destinationId}:event-${msg.seq}` : `${destinationId}:${msg.seq}`;
}

/**
 * Whether a delivery may ever be attempted by the router: ordered deliveries wait for their turn
 * and batching ones for their batch, in storage. (Whether its destination can take it now is
 * Deliveries.direct's call.)
 */
export function mayGoDirect(dest: Pick<DestinationRecord, "ordering" | "batching">): boolean {
  return dest.ordering !== "PER_USER" && !dest.batching;
}

/** What a direct attempt ended in: done (delivered, parked, dead-lettered, dropped) or handed back. */
export type DirectEnd = "done" | "handed_back";

/**
 * A delivery the router attempts itself (docs/design/delivery-at-scale.md §6), seen by the
 * DeliveryHandler as a partition's message: the headers and body the router would have stored,
 * attempt 0, first stored now. Its ack and term mean the attempt ended (the handler acks only
 * once a retry is parked or a dead letter stored); a nak hands it back, and the router then
 * stores it on DELIVERIES. Progress notes keep the call's EVENTS message alive.
 */
export class DirectMsg implements JsMsg {
  readonly data: Uint8Array;
  readonly headers: MsgHdrs;
  readonly subject: string;
  readonly info: DeliveryInfo;
  readonly state: DeliveryState;
  readonly sid = 0;
  readonly redelivered = false;
  /** Settles with how the attempt ended. */
  readonly ended: Promise<DirectEnd>;
  /**
   * The attempt's record, kept here for the router to write with the call's routing record in
   * one message (AttemptLog.delivered), when the router allowed it (`keepsRecord`).
   */
  kept: AttemptRecord | undefined;
  readonly keepsRecord: boolean;
  readonly #event: JsMsg;
  #end!: (how: DirectEnd) => void;
  #done = false;

  /** What records made of it take from the call (recordFields of its headers), known to the router. */
  readonly fields: RecordFields;

  constructor(
    event: JsMsg,
    stored: { subject: string; data: Uint8Array; headers: MsgHdrs; fields: RecordFields },
    keepsRecord = false,
  ) {
    const { subject, data, headers } = stored;
    this.#event = event;
    this.fields = stored.fields;
    this.keepsRecord = keepsRecord;
    this.subject = subject;
    this.data = data;
    this.headers = headers;
    const now = Date.now();
    this.state = { attempts: 0, firstTimeMs: now, dueMs: 0 };
    // Only what the handler reads: it was never stored, so it has no sequence of its own.
    this.info = {
      domain: "",
      stream: DELIVERIES_STREAM,
      consumer: "",
      deliveryCount: 1,
      redeliveryCount: 0,
      redelivered: false,
      streamSequence: 0,
      deliverySequence: 0,
      timestampNanos: now * 1e6,
      pending: 0,
    };
    this.ended = new Promise((resolve) => {
      this.#end = resolve;
    });
  }

  /**
   * Keeps a delivered attempt's records instead of their being written now, when they are one
   * (one URL tried) that sent the routed body (not a mapped one, which its record keeps) and the
   * router asked for it; says whether it did.
   */
  keep(records: readonly AttemptRecord[]): boolean {
    if (!this.keepsRecord || this.#done || records.length !== 1) return false;
    if (records[0]!.requestBody !== undefined) return false;
    this.kept = records[0];
    return true;
  }

  /** The call's EVENTS sequence: what a fallback id would be derived from. */
  get seq(): number {
    return this.#event.seq;
  }

  ack(): void {
    this.#settle("done");
  }

  term(): void {
    this.#settle("done");
  }

  nak(): void {
    this.#settle("handed_back");
  }

  working(): void {
    if (!this.#done) this.#event.working();
  }

  async ackAck(): Promise<boolean> {
    this.#settle("done");
    return true;
  }

  next(_subj: string, _ro?: Partial<PullOptions>): void {
    throw new Error("a direct delivery is not pulled");
  }

  json<T>(): T {
    return JSON.parse(this.string()) as T;
  }

  string(): string {
    return new TextDecoder().decode(this.data);
  }

  #settle(how: DirectEnd): void {
    if (this.#done) return;
    this.#done = true;
    this.#end(how);
  }
}
