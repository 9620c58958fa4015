import type { ConfigStore, Logger } from "@hookpost/core";
import { DEAD_STREAM, deadSubject, deleteMessages, isNotFound } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { ownsKey } from "./ordered/ownership.js";

const DEAD_PREFIX = deadSubject("");
/** After a dead letter is recorded here, the shares are checked this soon (once per burst). */
const NUDGE_MS = 1_000;
/** Letters dropped between two looks at whether the dispatcher is stopping. */
const DROP_CHUNK = 200;
/**
 * Shares are enforced once DEAD holds this much of its limit. Below it nobody's letters are
 * pushed out, so a source may keep more than its share (a lone source may use most of DEAD); the
 * quarter left is far more than the letters written in the second before a trim.
 */
export const DEAD_PRESSURE = 0.75;

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
 * (SOURCE_MAX_DEAD_LETTER_BYTES): once DEAD is 3/4 full, the sources over their share drop their
 * oldest letters (counted, logged), as many as bring DEAD back under 3/4, each in proportion to
 * how far it is over (never below its share), before DEAD itself has to drop anyone's. While DEAD
 * has room nothing is dropped: a share that cut a lone source at 1/16 of DEAD lost letters with
 * 15/16 of it empty.
 *
 * A source's bytes: its destinations' letters (per-subject counts, one per destination) times
 * DEAD's average letter; a destination shared by sources counts against each. A source over its
 * share sheds its shared destinations' letters first, its own destinations' only for what is left
 * over, each destination the same fraction, so every replica computes the same cut; each
 * destination is cut by the replica that owns it.
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
    const { messages, bytes } = info.state;
    const needed = bytes - DEAD_PRESSURE * info.config.max_bytes;
    if (messages === 0 || info.config.max_bytes <= 0 || needed <= 0) return;
    const average = bytes / messages;
    // Letters per destination: one subject each (a FAN_OUT target's letter is its destination's).
    const letters = new Map<string, number>();
    for (const [subject, count] of Object.entries(info.state.subjects ?? {}))
      letters.set(subject.slice(DEAD_PREFIX.length), count);
    // Per source: the bytes of the destinations it alone sends to, and of those it shares (whose
    // letters may be another source's: a subject does not say whose).
    type Part = { bytes: number; destinations: string[] };
    const usage = new Map<string, { own: Part; shared: Part }>();
    for (const [destinationId, n] of letters) {
      const sourceIds = d.store.destination(destinationId)?.sourceIds ?? [];
      for (const sourceId of sourceIds) {
        const u = usage.get(sourceId) ?? {
          own: { bytes: 0, destinations: [] },
          shared: { bytes: 0, destinations: [] },
        };
        const part = sourceIds.length === 1 ? u.own : u.shared;
        part.bytes += n * average;
        part.destinations.push(destinationId);
        usage.set(sourceId, u);
      }
    }
    // The share of its letters each destination sheds: the largest its sources ask. A source over
    // its share sheds its shared destinations first: its own destinations only lose letters when
    // its own letters alone are over it, so another source flooding a destination they share never
    // drops the letters of a destination it has no part in.
    const shed = new Map<string, number>();
    const ask = (part: Part, fraction: number) => {
      for (const id of part.destinations) shed.set(id, Math.max(shed.get(id) ?? 0, fraction));
    };
    // What brings DEAD under its 3/4, from the sources over their share, each by how far over.
    const excess = (u: { own: Part; shared: Part }) => u.own.bytes + u.shared.bytes - d.maxBytesPerSource;
    let totalExcess = 0;
    for (const u of usage.values()) totalExcess += Math.max(0, excess(u));
    if (totalExcess <= 0) return;
    const scale = Math.min(1, needed / totalExcess);
    for (const [sourceId, u] of usage) {
      if (excess(u) <= 0) continue;
      const over = excess(u) * scale;
      d.logger.warn(
        {
          sourceId,
          bytes: Math.round(u.own.bytes + u.shared.bytes),
          share: d.maxBytesPerSource,
          dropping: Math.round(over),
        },
        "DEAD is 3/4 full and this source's dead letters over its share (SOURCE_MAX_DEAD_LETTER_BYTES): dropping its oldest",
      );
      if (u.shared.bytes > 0) ask(u.shared, Math.min(1, over / u.shared.bytes));
      const rest = over - u.shared.bytes;
      if (rest > 0 && u.own.bytes > 0) ask(u.own, rest / u.own.bytes);
    }
    for (const [destinationId, fraction] of shed) {
      if (!this.#owns(destinationId)) continue;
      // In chunks: a source far over its share may have tens of thousands to drop, and a
      // dispatcher stopping (a deploy) must not wait for all of them.
      for (let left = Math.ceil((letters.get(destinationId) ?? 0) * fraction); left > 0 && !this.#stopped; ) {
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
