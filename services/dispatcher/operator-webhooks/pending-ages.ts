import type { DestinationRecord } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  DELIVERY_SUBJECT_PREFIX,
  destinationOfSubject,
  FIRST_TIME_HEADER,
  isNotFound,
  LANE_SUBJECT_PREFIX,
  nextMessage,
  ORDERED_STREAM,
  orderedSubjectsOf,
} from "@hookpost/core";
import type { JetStreamManager, StoredMsg } from "nats";

/** Lookups in flight at once. */
const CONCURRENCY = 16;

/** Where a destination's pending calls are looked up: a subject of DELIVERIES, or its users on ORDERED. */
type Place = { stream: string; filter: string };

/**
 * How old each destination's oldest pending call is (from when it was first stored, as the
 * destination health shows it), at a cost that follows the destinations with old calls, not all
 * destinations (docs/operations.md#alerting):
 * - the shared partitions hold fresh deliveries in the order stored, so one lookup of their
 *   oldest message says whether any is older than `floorMs`; only then are the subjects listed
 *   and each destination holding some looked up;
 * - lanes hold parked calls (retries, paused, breaker open), whose first-stored time travels in
 *   a header: every lane is looked up (there is one per destination with parked work);
 * - ORDERED (PER_USER destinations) is never re-parked: its first message's time says whether
 *   any is old, then each PER_USER destination is looked up.
 * At most `lookups` lookups per check (one per subject holding calls): destinations in `first`
 * (announced behind, so their recovery is seen) first, then the others in turn over the checks.
 */
export class PendingAges {
  readonly #jsm: JetStreamManager;
  readonly #lookups: number;
  #cursor = 0;

  constructor(jsm: JetStreamManager, o: { lookups: number }) {
    this.#jsm = jsm;
    this.#lookups = o.lookups;
  }

  /**
   * For each destination of `destinations` whose pending calls are known at this check: when its
   * oldest was first stored (ms), or undefined when none is older than `floorMs`. Destinations
   * left for a later check (over the budget) are absent.
   */
  async look(
    destinations: readonly DestinationRecord[],
    floorMs: number,
    nowMs: number,
    first: ReadonlySet<string>,
  ): Promise<Map<string, number | undefined>> {
    const cutoff = nowMs - floorMs;
    const wanted = new Map(destinations.map((d) => [d.id, d]));
    const places = new Map<string, Place[]>();
    const add = (id: string | undefined, stream: string, filter: string) => {
      if (id === undefined || !wanted.has(id)) return;
      let p = places.get(id);
      if (!p) {
        p = [];
        places.set(id, p);
      }
      p.push({ stream, filter });
    };
    const oldestPartition = await nextMessage(this.#jsm, DELIVERIES_STREAM, `${DELIVERY_SUBJECT_PREFIX}>`, 1);
    if (oldestPartition && firstStored(oldestPartition) <= cutoff) {
      // Each subject as listed: a lookup on a literal subject is answered from the server's
      // per-subject index, a wildcard one (deliveries.*.<id>) scans (measured: 100 times slower).
      for (const subject of await this.#subjects(DELIVERIES_STREAM, `${DELIVERY_SUBJECT_PREFIX}>`))
        add(destinationOfSubject(subject), DELIVERIES_STREAM, subject);
    }
    for (const subject of await this.#subjects(DELIVERIES_STREAM, `${LANE_SUBJECT_PREFIX}>`))
      add(destinationOfSubject(subject), DELIVERIES_STREAM, subject);
    if (await this.#orderedOlderThan(cutoff)) {
      for (const d of destinations)
        if (d.ordering === "PER_USER") add(d.id, ORDERED_STREAM, orderedSubjectsOf(d.id));
    }

    // Everything not holding an old call is known at once: nothing pending is older than the floor.
    const out = new Map<string, number | undefined>();
    for (const d of destinations) if (!places.has(d.id)) out.set(d.id, undefined);
    const ids = [...places.keys()];
    const start = this.#cursor % Math.max(1, ids.length);
    const rotated = [...ids.slice(start), ...ids.slice(0, start)];
    const order = [...rotated.filter((id) => first.has(id)), ...rotated.filter((id) => !first.has(id))];
    // The budget counts lookups (a destination has up to 2P + 1 subjects), not destinations.
    const taken: string[] = [];
    let budget = this.#lookups;
    for (const id of order) {
      const n = places.get(id)!.length;
      if (n > budget && taken.length > 0) break;
      taken.push(id);
      budget -= n;
    }
    this.#cursor = start + taken.length;
    for (let i = 0; i < taken.length; i += CONCURRENCY) {
      await Promise.all(
        taken.slice(i, i + CONCURRENCY).map(async (id) => {
          const times = await Promise.all(places.get(id)!.map((p) => this.#oldest(p)));
          let oldest: number | undefined;
          for (const t of times) if (t !== undefined && (oldest === undefined || t < oldest)) oldest = t;
          out.set(id, oldest);
        }),
      );
    }
    return out;
  }

  async #oldest({ stream, filter }: Place): Promise<number | undefined> {
    const m = await nextMessage(this.#jsm, stream, filter, 1);
    return m ? firstStored(m) : undefined;
  }

  /** The subjects matching `filter` that hold messages (one stream info). */
  async #subjects(stream: string, filter: string): Promise<string[]> {
    try {
      return Object.keys(
        (await this.#jsm.streams.info(stream, { subjects_filter: filter })).state.subjects ?? {},
      );
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
  }

  async #orderedOlderThan(cutoff: number): Promise<boolean> {
    try {
      const { state } = await this.#jsm.streams.info(ORDERED_STREAM);
      return state.messages > 0 && Date.parse(state.first_ts) <= cutoff;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}

/** When a pending call was first stored: a parked one carries it in a header (its lane message is newer). */
function firstStored(m: StoredMsg): number {
  const first = Number(m.header?.get(FIRST_TIME_HEADER));
  const stored = m.time.getTime();
  return Number.isFinite(first) && first > 0 && first < stored ? first : stored;
}
