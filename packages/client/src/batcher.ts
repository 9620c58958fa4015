import type { Callback } from "./analytics-error.js";
import type { DebugLog } from "./debug.js";
import { CallQueue, type QueuedCall } from "./queue.js";

/** Delivers one batch and reports the outcome itself; never rejects. */
export type DeliverFn = (calls: QueuedCall[], signal: AbortSignal) => Promise<void>;

export interface BatcherOptions {
  flushAt: number;
  flushAfter: number;
  maxInFlight: number;
  maxBatchBytes: number;
  /** Calls per batch (the contract's MAX_BATCH_CALLS default). */
  maxBatchCalls: number;
  deliver: DeliverFn;
  log: DebugLog;
}

interface Waiter {
  /** Resolve once every call with seq <= target has settled. */
  target: number;
  resolve: () => void;
}

/**
 * Batchers holding calls not yet settled (queued, in flight or waiting to retry). When the event
 * loop runs out of work (`beforeExit`: the process is about to end on its own) each of them
 * flushes: its calls are sent, or reported as failed, before the process exits, instead of
 * vanishing with it. The flush's keep-alive holds the process until they settle; then
 * `beforeExit` comes again, finds nothing pending, and the process ends. One listener for all
 * clients, and a client is held here only while it has calls pending.
 */
const pendingAtExit = new Set<Batcher>();
let exitHookInstalled = false;

function flushAtExit(): void {
  for (const batcher of [...pendingAtExit]) void batcher.flush();
}

/**
 * When to send what: a batch leaves when `flushAt` calls are queued, when `flushAfter` ms passed
 * since the last batch left, or when a flush asked for the calls queued so far. At most
 * `maxInFlight` batches are out at once; beyond that, calls wait in the queue (and later leave in
 * bigger batches, which is what a busy server needs).
 */
export class Batcher {
  private readonly queue = new CallQueue();
  private readonly inFlight = new Set<{ firstSeq: number }>();
  private readonly waiters: Waiter[] = [];
  private readonly abortController = new AbortController();
  private nextSeq = 1;
  /** Calls up to this seq were asked to leave (flush/timer) regardless of flushAt. */
  private flushUpTo = 0;
  private timer: NodeJS.Timeout | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  private _flushAt: number;
  private _flushAfter: number;

  constructor(private readonly options: BatcherOptions) {
    this._flushAt = options.flushAt;
    this._flushAfter = options.flushAfter;
  }

  get flushAt(): number {
    return this._flushAt;
  }

  set flushAt(n: number) {
    this._flushAt = n;
    this.pump();
  }

  get flushAfter(): number {
    return this._flushAfter;
  }

  /** A new interval counts from now. */
  set flushAfter(ms: number) {
    this._flushAfter = ms;
    this.clearTimer();
    this.armTimer();
  }

  /** Calls waiting to be sent (not counting those in flight). */
  get queued(): number {
    return this.queue.length;
  }

  get batchesInFlight(): number {
    return this.inFlight.size;
  }

  enqueue(frame: Uint8Array, callback: Callback | undefined): void {
    this.queue.push({ seq: this.nextSeq++, frame, callback });
    this.pump();
    this.trackPending();
  }

  /** Sends everything queued now; resolves when all of it (and what was in flight) has settled. */
  flush(): Promise<void> {
    const target = this.nextSeq - 1;
    if (target < this.lowestUnsettled()) return Promise.resolve();
    this.flushUpTo = Math.max(this.flushUpTo, target);
    const done = new Promise<void>((resolve) => this.waiters.push({ target, resolve }));
    this.updateKeepAlive();
    this.pump();
    return done;
  }

  /**
   * Gives up: aborts in-flight batches and their retries (they report themselves as failed) and
   * returns the calls that were never sent, for the caller to report.
   */
  abort(): QueuedCall[] {
    this.abortController.abort();
    this.clearTimer();
    const stranded = this.queue.drain();
    this.settleWaiters();
    this.trackPending();
    return stranded;
  }

  private pump(): void {
    while (this.inFlight.size < this.options.maxInFlight && !this.abortController.signal.aborted) {
      const head = this.queue.peek();
      if (!head || (this.queue.length < this._flushAt && head.seq > this.flushUpTo)) break;
      const batch = this.queue.takeBatch(this.options.maxBatchBytes, this.options.maxBatchCalls);
      this.clearTimer(); // flushAfter counts from the last batch that left
      this.start(batch);
    }
    this.armTimer();
  }

  private start(batch: QueuedCall[]): void {
    const entry = { firstSeq: batch[0]!.seq };
    this.inFlight.add(entry);
    this.options.log(
      "sending batch of %d calls (%d queued, %d in flight)",
      batch.length,
      this.queue.length,
      this.inFlight.size,
    );
    void this.options.deliver(batch, this.abortController.signal).finally(() => {
      this.inFlight.delete(entry);
      this.settleWaiters();
      this.pump();
      this.trackPending();
    });
  }

  /** Arms the flushAfter timer when calls are waiting that no flush has asked for yet. */
  private armTimer(): void {
    if (this.timer || this.nextSeq - 1 <= this.flushUpTo || this.queue.length === 0) return;
    if (this.abortController.signal.aborted) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.options.log("flushAfter (%d ms) elapsed", this._flushAfter);
      this.flushUpTo = this.nextSeq - 1;
      this.pump();
    }, this._flushAfter);
    // Unref'd: an idle process is not held open by it; its queued calls leave at beforeExit.
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Registers this batcher for a flush at `beforeExit` while it has unsettled calls. */
  private trackPending(): void {
    if (this.queue.length > 0 || this.inFlight.size > 0) {
      pendingAtExit.add(this);
      if (!exitHookInstalled) {
        exitHookInstalled = true;
        process.on("beforeExit", flushAtExit);
      }
    } else {
      pendingAtExit.delete(this);
    }
  }

  /** Every call below this seq has settled (stored or reported). */
  private lowestUnsettled(): number {
    let lowest = this.queue.peek()?.seq ?? this.nextSeq;
    for (const b of this.inFlight) lowest = Math.min(lowest, b.firstSeq);
    return lowest;
  }

  private settleWaiters(): void {
    const lowest = this.lowestUnsettled();
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (w.target < lowest) {
        this.waiters.splice(i, 1);
        w.resolve();
      }
    }
    this.updateKeepAlive();
  }

  /**
   * Our timers and retry sleeps are unref'd so an idle client never holds a process open, but an
   * awaited flush()/close() must: a promise alone does not keep Node running.
   */
  private updateKeepAlive(): void {
    if (this.waiters.length > 0 && !this.keepAlive) {
      this.keepAlive = setInterval(() => {}, 1 << 30);
    } else if (this.waiters.length === 0 && this.keepAlive) {
      clearInterval(this.keepAlive);
      this.keepAlive = undefined;
    }
  }
}
