import { MAX_URLS } from "@hookpost/contract";
import type { AttemptLog, ConfigStore, DeadLetters, Logger } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  deadRecordOf,
  destinationOfSubject,
  isNotFound,
  LANE_CONSUMER_PREFIX,
  LANE_SUBJECT_PREFIX,
  LEGACY_CONSUMER_PREFIX,
  laneSubject,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  nextMessage,
  recordFields,
  SOURCE_ID_HEADER,
  targetId,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { removeDestinationDeliveries } from "./consumers.js";
import { migrateLegacyConsumers } from "./legacy.js";
import { type Parking, stateOf } from "./parking.js";

export interface JanitorDeps {
  jsm: JetStreamManager;
  store: ConfigStore;
  deadLetters: DeadLetters;
  attemptLog?: AttemptLog;
  retryWindowMs: number;
  logger: Logger;
  /** Deliveries an older replica still routes to the per-destination layout move to lanes. */
  parking: Parking;
}

const decoder = new TextDecoder();

/**
 * Periodic housekeeping on DELIVERIES, so nothing lingers or vanishes without a record:
 * - lanes and pending deliveries of destinations deleted while no dispatcher ran (or that
 *   the router fanned out to just as they were deleted) are removed. An id must look orphaned
 *   on two runs in a row, so a destination created a moment ago on another replica is safe;
 * - a disabled destination's backlog (its lane, and a FAN_OUT one's targets' lanes) is kept, but
 *   what is older than the retry window is dead-lettered before stream max-age would drop it
 *   silently;
 * - what is left in the per-destination layout moves to lanes (legacy.ts).
 * Every replica runs it (housekeeping.ts); all steps are idempotent (dead letters are deduplicated per delivery).
 */
export class Janitor {
  readonly #d: JanitorDeps;
  readonly #suspects = new Set<string>();

  constructor(deps: JanitorDeps) {
    this.#d = deps;
  }

  async run(): Promise<void> {
    await migrateLegacyConsumers({ jsm: this.#d.jsm, parking: this.#d.parking, logger: this.#d.logger });
    await this.#removeOrphans();
    for (const dest of this.#d.store.destinations()) {
      if (dest.enabled) continue;
      await this.#expireBacklog(dest.id);
      // A FAN_OUT destination's URLs wait on lanes of their own (its delivery targets,
      // docs/design/shaping.md 7.2): each is expired too, a URL removed since included. Only
      // for FAN_OUT: each lane looked at is a server lookup, and most destinations have none.
      if (dest.deliveryMode !== "FAN_OUT") continue;
      for (let i = 0; i < MAX_URLS; i++) await this.#expireBacklog(targetId(dest.id, i));
    }
  }

  async #removeOrphans(): Promise<void> {
    const d = this.#d;
    const ids = new Set<string>();
    for await (const c of d.jsm.consumers.list(DELIVERIES_STREAM)) {
      // The server lists a consumer that is being deleted at that moment as null.
      for (const prefix of [LANE_CONSUMER_PREFIX, LEGACY_CONSUMER_PREFIX])
        if (c?.name.startsWith(prefix)) ids.add(c.name.slice(prefix.length));
    }
    for (const filter of [`${DELIVERY_SUBJECT_PREFIX}>`, `${LANE_SUBJECT_PREFIX}>`]) {
      const info = await d.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
      for (const subject of Object.keys(info.state.subjects ?? {})) {
        const id = destinationOfSubject(subject);
        if (id !== undefined) ids.add(id);
      }
    }

    const orphans = [...ids].filter((id) => !d.store.destination(id));
    for (const id of [...this.#suspects]) if (!orphans.includes(id)) this.#suspects.delete(id);
    for (const id of orphans) {
      if (!this.#suspects.has(id)) {
        this.#suspects.add(id);
        continue;
      }
      this.#suspects.delete(id);
      await removeDestinationDeliveries(d.jsm, id);
      d.logger.info({ destinationId: id }, "removed deliveries of a deleted destination");
    }
  }

  /**
   * A paused destination's deliveries wait on its lane. Parked in about the order they were
   * first stored: stop at the first one still inside the window.
   */
  async #expireBacklog(destinationId: string): Promise<void> {
    const d = this.#d;
    const cutoff = Date.now() - d.retryWindowMs;
    let seq = 1;
    for (;;) {
      const m = await nextMessage(d.jsm, DELIVERIES_STREAM, laneSubject(destinationId), seq);
      if (!m) return;
      const state = stateOf(m.header, m.time.getTime());
      if (state.firstTimeMs > cutoff) return;
      const messageId = m.header?.get(MESSAGE_ID_HEADER) || `seq-${m.seq}`;
      const sourceId = m.header?.get(SOURCE_ID_HEADER) ?? "";
      // A call the router could not render holds the stored call, not a body: the letter keeps
      // the mark, so a replay marks it again rather than send it (as delivery.ts's letters do).
      const notRendered = m.header?.get(NOT_RENDERED_HEADER);
      const letter = {
        messageId,
        destinationId,
        sourceId,
        body: decoder.decode(m.data),
        ...(notRendered ? { notRendered } : {}),
        attempts: state.attempts,
        outcomes: [],
        reason: "destination disabled for the whole retry window",
        firstAttemptTime: new Date(state.firstTimeMs).toISOString(),
        deadTime: new Date().toISOString(),
        ...recordFields(m.header),
      };
      const deadSequence = await d.deadLetters.record(letter, `${destinationId}:${m.seq}`);
      d.attemptLog?.dead(deadRecordOf(letter, deadSequence));
      try {
        await d.jsm.streams.deleteMessage(DELIVERIES_STREAM, m.seq, false);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      d.logger.warn({ destinationId, seq: m.seq }, "delivery of a disabled destination dead-lettered");
      seq = m.seq + 1;
    }
  }
}
