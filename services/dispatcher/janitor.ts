import type { AttemptLog, ConfigStore, DeadLetters, Logger } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  deadRecordOf,
  deliverySubject,
  isNotFound,
  MESSAGE_ID_HEADER,
  SOURCE_ID_HEADER,
} from "@hookpost/core";
import type { JetStreamManager, StoredMsg } from "nats";
import { removeDestinationConsumer } from "./consumers.js";

export interface JanitorDeps {
  jsm: JetStreamManager;
  store: ConfigStore;
  deadLetters: DeadLetters;
  attemptLog?: AttemptLog;
  retryWindowMs: number;
  intervalMs: number;
  logger: Logger;
}

const CONSUMER_PREFIX = "dest_";
const decoder = new TextDecoder();

/**
 * Periodic housekeeping on DELIVERIES, so nothing lingers or vanishes without a record:
 * - consumers and pending deliveries of destinations deleted while no dispatcher ran (or that
 *   the router fanned out to just as they were deleted) are removed. An id must look orphaned
 *   on two runs in a row, so a destination created a moment ago on another replica is safe;
 * - a disabled destination's backlog is kept, but what is older than the retry window is
 *   dead-lettered before stream max-age would drop it silently.
 * Every replica runs it; all steps are idempotent (dead letters are deduplicated per delivery).
 */
export class Janitor {
  readonly #d: JanitorDeps;
  readonly #suspects = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(deps: JanitorDeps) {
    this.#d = deps;
  }

  start(firstRunMs = 5000): void {
    const tick = () => {
      this.#running = this.run()
        .catch((err) => this.#d.logger.warn({ err: (err as Error).message }, "janitor run failed"))
        .finally(() => {
          this.#running = undefined;
          if (this.#timer) this.#timer = setTimeout(tick, this.#d.intervalMs).unref();
        });
    };
    this.#timer = setTimeout(tick, firstRunMs).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  async run(): Promise<void> {
    await this.#removeOrphans();
    for (const dest of this.#d.store.destinations()) {
      if (!dest.enabled) await this.#expireBacklog(dest.id);
    }
  }

  async #removeOrphans(): Promise<void> {
    const d = this.#d;
    const ids = new Set<string>();
    for await (const c of d.jsm.consumers.list(DELIVERIES_STREAM)) {
      // The server lists a consumer that is being deleted at that moment as null.
      if (c?.name.startsWith(CONSUMER_PREFIX)) ids.add(c.name.slice(CONSUMER_PREFIX.length));
    }
    const info = await d.jsm.streams.info(DELIVERIES_STREAM, {
      subjects_filter: `${DELIVERY_SUBJECT_PREFIX}>`,
    });
    for (const subject of Object.keys(info.state.subjects ?? {}))
      ids.add(subject.slice(DELIVERY_SUBJECT_PREFIX.length));

    const orphans = [...ids].filter((id) => !d.store.destination(id));
    for (const id of [...this.#suspects]) if (!orphans.includes(id)) this.#suspects.delete(id);
    for (const id of orphans) {
      if (!this.#suspects.has(id)) {
        this.#suspects.add(id);
        continue;
      }
      this.#suspects.delete(id);
      await removeDestinationConsumer(d.jsm, id);
      d.logger.info({ destinationId: id }, "removed deliveries of a deleted destination");
    }
  }

  /** Deliveries are stored in time order: stop at the first one still inside the window. */
  async #expireBacklog(destinationId: string): Promise<void> {
    const d = this.#d;
    const cutoff = Date.now() - d.retryWindowMs;
    let seq = 1;
    for (;;) {
      const m = await this.#next(destinationId, seq);
      if (!m || m.time.getTime() > cutoff) return;
      const messageId = m.header?.get(MESSAGE_ID_HEADER) || `seq-${m.seq}`;
      const sourceId = m.header?.get(SOURCE_ID_HEADER) ?? "";
      const letter = {
        messageId,
        destinationId,
        sourceId,
        body: decoder.decode(m.data),
        attempts: 0,
        outcomes: [],
        reason: "destination disabled for the whole retry window",
        firstAttemptTime: m.time.toISOString(),
        deadTime: new Date().toISOString(),
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

  async #next(destinationId: string, seq: number): Promise<StoredMsg | undefined> {
    try {
      const query = { seq, next_by_subj: deliverySubject(destinationId) } as unknown as { seq: number };
      return await this.#d.jsm.streams.getMessage(DELIVERIES_STREAM, query);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}
