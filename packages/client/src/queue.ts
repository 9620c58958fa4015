import type { Callback } from "./analytics-error.js";

/**
 * One accepted call waiting to be sent, or in a batch being sent. Kept small (type and message id
 * are in the frame, decoded only to report a failure): a full queue holds many of these.
 */
export interface QueuedCall {
  /** Enqueue order; `flush()` waits for every call up to a sequence number. */
  readonly seq: number;
  /** The call's encoding within a BatchRequest (see wire.ts). */
  readonly frame: Uint8Array;
  readonly callback: Callback | undefined;
}

/**
 * FIFO of queued calls. A head index instead of Array#shift keeps taking a batch from a long
 * queue (up to maxQueueSize) linear in the batch, not in the queue.
 */
export class CallQueue {
  private items: QueuedCall[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  peek(): QueuedCall | undefined {
    return this.items[this.head];
  }

  push(call: QueuedCall): void {
    this.items.push(call);
  }

  /**
   * Takes calls from the head while the batch stays within `maxBytes` (frame sizes add up exactly
   * to the BatchRequest size) and `maxCalls`; always at least one call, as no single call exceeds
   * the limit.
   */
  takeBatch(maxBytes: number, maxCalls: number): QueuedCall[] {
    const batch: QueuedCall[] = [];
    let bytes = 0;
    while (this.head < this.items.length) {
      const next = this.items[this.head]!;
      if (batch.length > 0 && (bytes + next.frame.length > maxBytes || batch.length >= maxCalls)) break;
      batch.push(next);
      bytes += next.frame.length;
      this.head++;
    }
    this.compact();
    return batch;
  }

  /** Removes and returns everything queued. */
  drain(): QueuedCall[] {
    const all = this.items.slice(this.head);
    this.items = [];
    this.head = 0;
    return all;
  }

  private compact(): void {
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}
