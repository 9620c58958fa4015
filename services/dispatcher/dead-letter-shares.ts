import type { ConfigStore, Logger } from "@hookpost/core";
import { DEAD_STREAM, deadSubject, deleteMessages, isNotFound } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { ownsKey } from "./ordered/ownership.js";
import { planShares } from "./source-shares.js";

const DEAD_PREFIX = deadSubject("");
/** After a dead letter is recorded here, the shares are checked this soon (once per burst). */
const NUDGE_MS = 1_000;
/** Letters dropped between two looks at whether the dispatcher is stopping. */
const DROP_CHUNK = 200;

export interface DeadLetterSharesDeps {
  jsm: JetStreamManager;
  store: ConfigStore;
  logger: Logger;
  /** SOURCE_MAX_DEAD_LETTER_BYTES: what one source's destinations' dead letters may take on DEAD. */
  maxBytesPerSource: number;
  /** This replica and the live ones: each destination is trimmed by one of them. */
  replicas?: { id: string; live: readonly string[] };
  /** Told of the dead letters dropped for a source over its share. */
  onDropped?: (count: number) => void;
}

/**
 * DEAD is shared by every source and drops its oldest letters when full: one source whose
 * endpoints fail would push out every other source's dead letters. So each source gets a share
 * (SOURCE_MAX_DEAD_LETTER_BYTES), kept once DEAD is 3/4 full (planShares, source-shares.ts):
 * sources over it drop their oldest letters (counted, logged) before DEAD has to drop anyone's.
 * While DEAD has room nothing is dropped: a share that cut a lone source at 1/16 of DEAD lost
 * letters with 15/16 of it empty. Every replica computes the same cut from DEAD's per-subject
 * counts (one subject per destination); each destination is cut by the replica that owns it.
 */
export class DeadLetterShares {
  readonly #d: DeadLetterSharesDeps;
  #running: Promise<void> | undefined;
  #soon: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: DeadLetterSharesDeps) {
    this.#d = deps;
  }

  /** Checks soon: dead letters were recorded (a burst of them checks once). */
  nudge(): void {
    if (this.#stopped) return;
    this.#soon ??= setTimeout(() => {
      this.#soon = undefined;
      this.run().catch((err) =>
        this.#d.logger.warn({ err: (err as Error).message }, "dead letter shares run failed"),
      );
    }, NUDGE_MS).unref();
  }

  /** One check at a time: two at once would each drop the oldest, twice as many as asked. */
  run(): Promise<void> {
    this.#running ??= this.#run().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** Plans no more runs, and has the one under way stop at its next chunk of drops. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#soon);
    this.#soon = undefined;
    await this.#running?.catch(() => {});
  }

  async #run(): Promise<void> {
    const d = this.#d;
    let info: Awaited<ReturnType<JetStreamManager["streams"]["info"]>>;
    try {
      info = await d.jsm.streams.info(DEAD_STREAM, { subjects_filter: `${DEAD_PREFIX}>` });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    // Letters per destination: one subject each (a FAN_OUT target's letter is its destination's).
    const letters = new Map<string, number>();
    for (const [subject, count] of Object.entries(info.state.subjects ?? {}))
      letters.set(subject.slice(DEAD_PREFIX.length), count);
    const drops = planShares({
      counts: letters,
      sourcesOf: (destinationId) => d.store.destination(destinationId)?.sourceIds ?? [],
      bytes: info.state.bytes,
      messages: info.state.messages,
      maxBytes: info.config.max_bytes,
      maxBytesPerSource: d.maxBytesPerSource,
      what: "dead letters (SOURCE_MAX_DEAD_LETTER_BYTES)",
      logger: d.logger,
    });
    for (const [destinationId, count] of drops) {
      if (!this.#owns(destinationId)) continue;
      // In chunks: a source far over its share may have tens of thousands to drop, and a
      // dispatcher stopping (a deploy) must not wait for all of them.
      for (let left = count; left > 0 && !this.#stopped; ) {
        const dropped = await deleteMessages(d.jsm, DEAD_STREAM, deadSubject(destinationId), {
          limit: Math.min(DROP_CHUNK, left),
        });
        if (dropped > 0) d.onDropped?.(dropped);
        if (dropped === 0) break;
        left -= dropped;
      }
    }
  }

  #owns(destinationId: string): boolean {
    const r = this.#d.replicas;
    return !r || ownsKey(r.id, r.live, destinationId);
  }
}
