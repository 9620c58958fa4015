import { EVENT_SEQ_HEADER } from "@hookpost/core";
import type { HeadStore } from "./head-store.js";

interface Entry {
  /** Sequence on HOOKPOST_ORDERED. */
  seq: number;
  /** Sequence on EVENTS: the order the call was accepted in (0 when the router did not say). */
  eventSeq: number;
}

/**
 * One user's stored calls as its worker knows them: the ORDERED sequence and the EVENTS sequence
 * of each. Routers can store a user's calls out of the accepted order (two replicas routing at
 * once, a publish retried after a failure), so the call to send is the stored one accepted first,
 * not the first stored. Each stored message is read once: `refresh` reads only what was stored
 * after the last one seen.
 */
export class SubjectView {
  readonly #heads: HeadStore;
  readonly subject: string;
  #entries: Entry[] = [];
  #seenTo = 0;
  /** Every call of this user accepted before `provenSeq` was routed, known at `provenAt`. */
  #provenSeq = 0;
  #provenAt = 0;
  /** performance.now() since the first call has waited for the router's floor. */
  waitingSince: number | undefined;

  constructor(heads: HeadStore, subject: string) {
    this.#heads = heads;
    this.subject = subject;
  }

  /** Reads the calls stored since the last refresh. */
  async refresh(): Promise<void> {
    for (;;) {
      const m = await this.#heads.next(this.subject, this.#seenTo + 1);
      if (!m) return;
      this.#seenTo = m.seq;
      const eventSeq = Number(m.header?.get(EVENT_SEQ_HEADER)) || 0;
      this.#entries.push({ seq: m.seq, eventSeq });
    }
  }

  /** The stored call accepted first (lowest EVENTS sequence; stored order among equals). */
  first(): Entry | undefined {
    let best: Entry | undefined;
    for (const e of this.#entries) if (!best || e.eventSeq < best.eventSeq) best = e;
    return best;
  }

  /** Records that every call of this user accepted before `eventSeq` is routed (as of `at`). */
  prove(eventSeq: number, at: number): void {
    this.#provenSeq = eventSeq;
    this.#provenAt = at;
  }

  /** Whether that was known before a listing that began at `since` (so the listing saw them all). */
  proven(eventSeq: number, since: number): boolean {
    return this.#provenSeq >= eventSeq && this.#provenAt <= since;
  }

  /** A call that was delivered, dead-lettered or found gone. */
  drop(seq: number): void {
    this.#entries = this.#entries.filter((e) => e.seq !== seq);
  }
}
