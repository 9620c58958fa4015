import { EVENTS_STREAM, isNotFound, ROUTER_CONSUMER, userHash } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { parseStoredCall } from "../router.js";

/** How often the floor may be read again while someone waits for it to rise. */
const REFRESH_MS = 20;
/** Unrouted events looked through at most, for one call stuck behind the floor. */
const MAX_GAP = 2000;

/**
 * The router's ack floor on EVENTS: every event up to this sequence has been routed (the router
 * acks only after its fan-out is stored). An ordered call with EVENTS sequence e may go once the
 * floor reaches e - 1: every call of its user accepted before it is then stored in ORDERED.
 * One read at a time, shared by every waiting worker; the floor only rises.
 */
export class RouterFloor {
  readonly #jsm: JetStreamManager;
  #floor = 0;
  /** performance.now() when the last read's answer came. */
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | undefined;

  constructor(jsm: JetStreamManager) {
    this.#jsm = jsm;
  }

  /**
   * True when a floor read that ended at or before `since` (performance.now(), when the caller
   * began listing the subject) says every event before `eventSeq` was routed: those calls were
   * stored before the listing began, so the listing saw them. Otherwise false, after reading the
   * floor again when it was too low (at most every 20 ms): the caller lists again and asks again.
   */
  async reached(eventSeq: number, since: number): Promise<boolean> {
    if (this.#floor >= eventSeq - 1) return this.#readAt <= since;
    if (!this.#reading) {
      const wait = Math.max(0, this.#readAt + REFRESH_MS - performance.now());
      this.#reading = this.#read(wait).finally(() => {
        this.#reading = undefined;
      });
    }
    await this.#reading;
    return false;
  }

  async #read(waitMs: number): Promise<void> {
    // not a wait on a fact: paces reads of the floor while workers wait for it to rise.
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    const info = await this.#jsm.consumers.info(EVENTS_STREAM, ROUTER_CONSUMER);
    this.#floor = Math.max(this.#floor, info.ack_floor.stream_seq);
    this.#readAt = performance.now();
  }

  /**
   * True when none of the events still stored on EVENTS before `eventSeq` (not routed yet, or
   * being routed) is a call of the user `hash`: then every earlier call of that user is routed,
   * whatever holds the floor back (an event whose ack was lost waits out the router's ack wait).
   * False when one is, or when too many are unrouted to look through.
   *
   * An earlier call whose ORDERED copy is stored (even delivered) but which is still on EVENTS
   * does not count as routed: the router tries it again (its other destinations' deliveries were
   * not all stored, or its ack was lost), and once the dedup window has passed that stores a new
   * copy, which would then be sent after this later call (test/dispatcher/ordered-reroute.test.ts).
   */
  async noneOfUser(hash: string, eventSeq: number): Promise<boolean> {
    if (eventSeq - 1 - this.#floor > MAX_GAP) return false;
    for (let seq = this.#floor + 1; seq < eventSeq; seq++) {
      let data: Uint8Array;
      try {
        data = (await this.#jsm.streams.getMessage(EVENTS_STREAM, { seq })).data;
      } catch (err) {
        if (isNotFound(err)) continue; // routed and acked: gone from the work queue
        throw err;
      }
      const call = parseStoredCall(data);
      if (typeof call !== "string" && userHash(call) === hash) return false;
    }
    return true;
  }
}
