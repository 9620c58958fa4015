import { Code, HookpostError } from "@hookpost/contract";
import { cancelled } from "./sync-engine.js";

/** Per-process limits of SyncAudience and SyncComputedTrait (README "Limits"). */
export interface SyncLimits {
  /** Syncs running at once in this process. */
  maxConcurrent: number;
  /** Syncs running at once for one source. */
  maxPerSource: number;
  /** Memory of one sync's in-memory sort run (ids and values) before it is spilled to disk. */
  runBytes: number;
  /** Memory all running syncs may use; each reserves `syncReserveBytes(runBytes)`. */
  memoryBytes: number;
  /** A sync stream that sends no message for this long is ended with DEADLINE_EXCEEDED. */
  idleTimeoutMs: number;
  /** Folder for the syncs' temporary files (runs, the new membership). */
  tmpDir: string;
}

/**
 * The largest request message grpc-js hands over (services/api/calls/limits.ts
 * MAX_RECEIVE_BYTES). A sync holds one such message, its decoded ids and the slices made of
 * them while adding them to the run.
 */
const MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * What one running sync is counted for against SYNC_MEMORY_BYTES, as measured
 * (test/ingest/sync-limits.test.ts): its run (V8 spends about twice the estimate the run is
 * capped by) and the request message being decoded, whose ids, entry pairs and the garbage
 * they leave until V8 collects it take about six times the message's size.
 */
export function syncReserveBytes(runBytes: number): number {
  return 2 * runBytes + 6 * MESSAGE_BYTES;
}

const MIB = 1024 * 1024;
const mib = (n: number) => `${Math.round((n / MIB) * 10) / 10} MiB`;

/**
 * Admission of syncs: at most `maxConcurrent` at once (and fewer when their reservations would
 * exceed `memoryBytes`), at most `maxPerSource` per source. A sync beyond that is refused at
 * once with RESOURCE_EXHAUSTED (retry later), never queued: a queued stream would hold its
 * connection and buffers all the same.
 */
export class SyncLimiter {
  readonly limits: SyncLimits;
  readonly #reserve: number;
  readonly #bySource = new Map<string, number>();
  #running = 0;
  /** Syncs refused so far, by reason (metrics). */
  readonly refused = { process: 0, source: 0, memory: 0 };

  constructor(limits: SyncLimits) {
    this.limits = limits;
    this.#reserve = syncReserveBytes(limits.runBytes);
  }

  get running(): number {
    return this.#running;
  }

  /** Memory reserved by the running syncs. */
  get reservedBytes(): number {
    return this.#running * this.#reserve;
  }

  /**
   * Runs one sync of `sourceId` under the limits: `fn` gets the request stream, ended with
   * DEADLINE_EXCEEDED when the client stays silent for idleTimeoutMs and with CANCELLED as soon
   * as `signal` aborts (so that a cancelled sync frees its slot and files at once).
   */
  async run<R, T>(
    sourceId: string,
    requests: AsyncIterable<R>,
    signal: AbortSignal | undefined,
    fn: (requests: AsyncIterable<R>) => Promise<T>,
  ): Promise<T> {
    this.#admit(sourceId);
    try {
      return await fn(untilIdle(requests, this.limits.idleTimeoutMs, signal));
    } finally {
      this.#running--;
      const n = (this.#bySource.get(sourceId) ?? 1) - 1;
      if (n === 0) this.#bySource.delete(sourceId);
      else this.#bySource.set(sourceId, n);
    }
  }

  #admit(sourceId: string): void {
    const l = this.limits;
    const mine = this.#bySource.get(sourceId) ?? 0;
    const retry = "retry when one has finished";
    if (this.#running >= l.maxConcurrent) {
      this.refused.process++;
      throw exhausted(
        `${this.#running} syncs are running on this ingest (SYNC_MAX_CONCURRENT=${l.maxConcurrent}): ${retry}`,
      );
    }
    if ((this.#running + 1) * this.#reserve > l.memoryBytes) {
      this.refused.memory++;
      throw exhausted(
        `the running syncs use the sync memory budget (${this.#running} × ${mib(this.#reserve)} of SYNC_MEMORY_BYTES=${mib(l.memoryBytes)}): ${retry}`,
      );
    }
    if (mine >= l.maxPerSource) {
      this.refused.source++;
      throw exhausted(
        `this source has ${mine} syncs running (SYNC_MAX_PER_SOURCE=${l.maxPerSource}): ${retry}`,
      );
    }
    this.#running++;
    this.#bySource.set(sourceId, mine + 1);
  }
}

function exhausted(message: string): HookpostError {
  return new HookpostError(Code.RESOURCE_EXHAUSTED, message);
}

/** `source`, failing when a message takes longer than `idleMs` to come or `signal` aborts. */
async function* untilIdle<R>(
  source: AsyncIterable<R>,
  idleMs: number,
  signal?: AbortSignal,
): AsyncGenerator<R> {
  const it = source[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      const stop = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new HookpostError(
                Code.DEADLINE_EXCEEDED,
                `no message for ${idleMs} ms: a sync stream must keep sending until it half-closes (SYNC_IDLE_TIMEOUT); the stored membership is unchanged`,
              ),
            ),
          idleMs,
        );
        onAbort = () => reject(cancelled());
        if (signal?.aborted) onAbort();
        else signal?.addEventListener("abort", onAbort, { once: true });
      });
      try {
        const pending = it.next();
        // Lost the race: its later failure (the call ended) is of no interest.
        pending.catch(() => {});
        const next = await Promise.race([pending, stop]);
        if (next.done) {
          finished = true;
          return;
        }
        yield next.value;
      } finally {
        clearTimeout(timer);
        if (onAbort) signal?.removeEventListener("abort", onAbort);
      }
    }
  } finally {
    // Not awaited: the source may be waiting for a message that never comes; ending the call
    // (the error status) ends it.
    if (!finished) void Promise.resolve(it.return?.()).catch(() => {});
  }
}
