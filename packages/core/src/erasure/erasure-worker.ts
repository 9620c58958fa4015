import { randomUUID } from "node:crypto";
import type { NatsConnection } from "nats";
import type { Logger } from "../log/logger.js";
import type { MembershipStore } from "../membership/membership-store.js";
import {
  addCounts,
  type DeletionRecord,
  type ErasedCounts,
  isZero,
  livePasses,
  NO_ERASURES,
} from "./deletion-record.js";
import type { DeletionStore } from "./deletion-store.js";
import { eraseMemberships } from "./erase-memberships.js";
import { erasePass } from "./erase-pass.js";

export interface ErasureWorkerOptions {
  /** ERASURE_INTERVAL: how often pending deletion requests are looked for. */
  intervalMs: number;
  /**
   * ERASURE_SETTLE: a request is done only after a pass that started at least this long after it
   * found nothing: a delivery in flight when it was made (a send under way, a fan-out not acked
   * yet) has written its dead letter, attempt record or parked copy by then.
   */
  settleMs: number;
  /** Audience and computed-trait memberships, which hold member ids (erase-memberships.ts). */
  memberships: MembershipStore;
  log: Logger;
}

/**
 * Works through pending deletion requests (DeletionStore): every interval, one pass over the
 * stores erases the calls of every pending request's user (erase-pass.ts) and removes them from
 * the stored memberships (erase-memberships.ts), adds up the counts and marks requests done. Every API replica runs one; passes are idempotent, so replicas working at
 * once, or a replica that restarts mid-pass, only repeat work, never lose or double-count it.
 */
export class ErasureWorker {
  readonly #nc: NatsConnection;
  readonly #store: DeletionStore;
  readonly #o: ErasureWorkerOptions;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<void> | undefined;
  #closed = false;

  constructor(nc: NatsConnection, store: DeletionStore, o: ErasureWorkerOptions) {
    this.#nc = nc;
    this.#store = store;
    this.#o = o;
  }

  start(): void {
    this.#schedule(0);
  }

  /** A request was just stored: look sooner than the interval (still after a short wait). */
  nudge(): void {
    if (this.#closed || this.#running) return;
    this.#schedule(Math.min(1000, this.#o.intervalMs));
  }

  /**
   * No more passes. One under way is not waited for (it may take a while on large stores): cut
   * short by the connection closing, it is repeated by the next pass anywhere.
   */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#running = this.runOnce()
        .catch((err) => {
          if (!this.#closed)
            this.#o.log.warn({ err: (err as Error).message }, "erasure pass failed; retrying");
        })
        .finally(() => {
          this.#running = undefined;
          if (!this.#closed) this.#schedule(this.#o.intervalMs);
        });
    }, ms);
    this.#timer.unref();
  }

  /** One pass for every pending request; resolves when their records are updated. */
  async runOnce(): Promise<void> {
    const pending = await this.#store.pending();
    if (pending.length === 0) return;
    const started = Date.now();
    // Registered on every request first: another replica's pass that finds nothing while this
    // one is erasing must not mark a request done before this one counted what it erased.
    const passId = randomUUID();
    const at = new Date(started).toISOString();
    for (const r of pending) {
      await this.#store.update(r.requestId, (cur) => ({
        ...cur,
        activePasses: { ...livePasses(cur, started), [passId]: at },
      }));
    }
    // What this pass erased so far: credited even when the pass fails half-way, or a later pass
    // that finds nothing would mark the request done without it.
    const acc = { lists: new Map<string, number>(), streams: new Map<string, ErasedCounts>() };
    let unreadable = 0;
    let failed = false;
    try {
      // Per user, the latest request: calls accepted before it are erased.
      const users = new Map<string, number>();
      for (const r of pending)
        users.set(r.userHash, Math.max(users.get(r.userHash) ?? 0, Date.parse(r.requestTime)));
      // Member lists first (small, and quick): a sync diffed against a list that still holds the
      // user may send a "left" call for them (docs/design/erasure.md).
      const lists = await eraseMemberships(this.#o.memberships, users, this.#o.settleMs, acc.lists);
      unreadable = lists.unreadable.length;
      if (unreadable > 0) {
        this.#o.log.warn(
          { memberships: lists.unreadable },
          "membership lists are unreadable (corrupt): deletion requests stay pending until they are removed (nats object rm hookpost_memberships <name>)",
        );
      }
      await erasePass(this.#nc, users, this.#o.settleMs, acc.streams);
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      const erased = acc.streams;
      for (const [user, n] of acc.lists)
        erased.set(user, { ...(erased.get(user) ?? NO_ERASURES), memberships: n });
      const credit = this.#credit(pending, passId, erased, started, !failed && unreadable === 0);
      // A failed pass still credits and deregisters (best effort: its error is the one reported).
      if (failed) await credit.catch(() => undefined);
      else await credit;
    }
  }

  /**
   * Adds a pass's counts to its requests and deregisters it; marks a request done when it may
   * finish (the pass completed and read every list), found nothing of the user, started the settle
   * time after the request and after any pass last erased something of it, and no other pass is
   * under way on it.
   */
  async #credit(
    pending: readonly DeletionRecord[],
    passId: string,
    erased: ReadonlyMap<string, ErasedCounts>,
    started: number,
    mayFinish: boolean,
  ): Promise<void> {
    // Two requests for one user: the first is credited with what was found.
    const credited = new Set<string>();
    for (const r of pending) {
      const found: ErasedCounts = credited.has(r.userHash)
        ? NO_ERASURES
        : (erased.get(r.userHash) ?? NO_ERASURES);
      credited.add(r.userHash);
      // What the pass erased of the user, credited to this request or an earlier one of theirs.
      const foundAny = !isZero(erased.get(r.userHash) ?? NO_ERASURES);
      const updated = await this.#store.update(r.requestId, (cur) => {
        const now = Date.now();
        const others = livePasses(cur, now, passId);
        // Settled: the request, and the last erasure of any pass (an attempt under way on what it
        // erased has stored its outcome since), are at least the settle time older than this pass.
        const since = Math.max(Date.parse(cur.requestTime), Date.parse(cur.lastErasedTime ?? "") || 0);
        const quiet = mayFinish && started - since >= this.#o.settleMs && !foundAny;
        return {
          ...cur,
          erased: addCounts(cur.erased, found),
          passes: cur.passes + 1,
          activePasses: others,
          ...(foundAny ? { lastErasedTime: new Date(now).toISOString() } : {}),
          ...(cur.doneTime === undefined && quiet && Object.keys(others).length === 0
            ? { doneTime: new Date(now).toISOString() }
            : {}),
        };
      });
      if (updated?.doneTime && r.doneTime === undefined) {
        this.#o.log.info({ requestId: r.requestId, erased: updated.erased }, "deletion request erased");
      }
    }
  }
}
