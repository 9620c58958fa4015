import type { ConfigStore, Logger } from "@hookpost/core";
import { DEAD_STREAM, deadSubject, deleteMessages, isNotFound, splitTarget } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { ownsKey } from "./ordered/ownership.js";

const DEAD_PREFIX = deadSubject("");
/** After a dead letter is recorded here, the shares are checked this soon (once per burst). */
const NUDGE_MS = 1_000;

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
 * (SOURCE_MAX_DEAD_LETTER_BYTES): over it, the oldest letters of that source's destinations are
 * dropped (counted, logged), before DEAD itself has to drop anyone's.
 *
 * A source's bytes: its destinations' letters (per-subject counts, one per destination) times
 * DEAD's average letter; a destination shared by sources counts against each. A source over its
 * share by a fraction f has each of its destinations shed a fraction f of its letters, so every
 * replica computes the same cut; each destination is cut by the replica that owns it.
 */
export class DeadLetterShares {
  readonly #d: DeadLetterSharesDeps;
  #running: Promise<void> | undefined;
  #soon: NodeJS.Timeout | undefined;

  constructor(deps: DeadLetterSharesDeps) {
    this.#d = deps;
  }

  /** Checks soon: dead letters were recorded (a burst of them checks once). */
  nudge(): void {
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

  async stop(): Promise<void> {
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
    if (messages === 0) return;
    const average = bytes / messages;
    // Letters per destination (a FAN_OUT destination's URLs each have their own subject).
    const letters = new Map<string, { subject: string; count: number }[]>();
    for (const [subject, count] of Object.entries(info.state.subjects ?? {})) {
      const id = subject.slice(DEAD_PREFIX.length);
      const destinationId = splitTarget(id)?.destinationId ?? id;
      letters.set(destinationId, [...(letters.get(destinationId) ?? []), { subject, count }]);
    }
    const usage = new Map<string, { bytes: number; destinations: string[] }>();
    for (const [destinationId, subjects] of letters) {
      const n = subjects.reduce((sum, s) => sum + s.count, 0);
      for (const sourceId of d.store.destination(destinationId)?.sourceIds ?? []) {
        const u = usage.get(sourceId) ?? { bytes: 0, destinations: [] };
        u.bytes += n * average;
        u.destinations.push(destinationId);
        usage.set(sourceId, u);
      }
    }
    // The share of its letters each destination sheds: the largest its sources ask.
    const shed = new Map<string, number>();
    for (const [sourceId, u] of usage) {
      if (u.bytes <= d.maxBytesPerSource) continue;
      const fraction = (u.bytes - d.maxBytesPerSource) / u.bytes;
      d.logger.warn(
        { sourceId, bytes: Math.round(u.bytes), share: d.maxBytesPerSource },
        "source's dead letters over its share (SOURCE_MAX_DEAD_LETTER_BYTES): dropping its oldest",
      );
      for (const id of u.destinations) shed.set(id, Math.max(shed.get(id) ?? 0, fraction));
    }
    for (const [destinationId, fraction] of shed) {
      if (!this.#owns(destinationId)) continue;
      for (const { subject, count } of letters.get(destinationId) ?? []) {
        const dropped = await deleteMessages(d.jsm, DEAD_STREAM, subject, {
          limit: Math.ceil(count * fraction),
        });
        if (dropped > 0) d.onDropped?.(dropped);
      }
    }
  }

  #owns(destinationId: string): boolean {
    const r = this.#d.replicas;
    return !r || ownsKey(r.id, r.live, destinationId);
  }
}
