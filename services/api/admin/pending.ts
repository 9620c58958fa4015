import {
  DELIVERIES_STREAM,
  deliverySubjects,
  destinationOfSubject,
  FIRST_TIME_HEADER,
  isNotFound,
  laneSubject,
  legacyDeliverySubject,
  ORDERED_STREAM,
  orderedDestinationOf,
  orderedSubjectsOf,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";

/** What is stored for one destination and not finished yet. */
export interface Pending {
  backlog: number;
  /** When the first of them was stored. */
  oldest?: Date;
}

/** Destinations looked up at once. */
const LOOKUPS_IN_FLIGHT = 32;
/**
 * Up to this many destinations, each is counted with its own subject filters; beyond, one look
 * at every DELIVERIES subject holding calls serves the whole page (measured: bench/health.ts).
 */
const FILTERED_UP_TO = 4;
/** ORDERED subjects (one per waiting user) listed in one answer at most; beyond, per destination. */
const ORDERED_LISTED_UP_TO = 20_000;

/** A subject filter holding some of a destination's calls. */
interface Waiting {
  stream: string;
  filter: string;
  count: number;
}

/**
 * Calls stored for each destination: every partition of the shared lane, its own lane, the
 * subject of before issue 24 (until a start moved it), and its users' ORDERED subjects. Both
 * streams keep a call until it is delivered or dead-lettered, so in-flight calls, retries and
 * calls held while paused or while the breaker is open all count.
 */
export async function pendingOf(jsm: JetStreamManager, ids: string[]): Promise<Map<string, Pending>> {
  const waiting = ids.length <= FILTERED_UP_TO ? await filtered(jsm, ids) : await scanned(jsm, ids);
  const out = new Map<string, Pending>();
  await inBatches(ids, async (id) => {
    const list = waiting.get(id) ?? [];
    // Only where something waits: a lookup on an empty filter may walk the stream for nothing.
    const firsts = await Promise.all(list.map((w) => firstStored(jsm, w.stream, w.filter)));
    let oldest: Date | undefined;
    for (const t of firsts) if (t && (!oldest || t < oldest)) oldest = t;
    const backlog = list.reduce((n, w) => n + w.count, 0);
    out.set(id, oldest ? { backlog, oldest } : { backlog });
  });
  return out;
}

/** A few destinations: each filter of each, counted by the server. */
async function filtered(jsm: JetStreamManager, ids: string[]): Promise<Map<string, Waiting[]>> {
  const out = new Map<string, Waiting[]>();
  await inBatches(ids, async (id) => {
    const filters: [string, string][] = [
      [DELIVERIES_STREAM, deliverySubjects(id)],
      [DELIVERIES_STREAM, laneSubject(id)],
      [DELIVERIES_STREAM, legacyDeliverySubject(id)],
      [ORDERED_STREAM, orderedSubjectsOf(id)],
    ];
    const counts = await Promise.all(filters.map(([stream, filter]) => countOf(jsm, stream, filter)));
    out.set(
      id,
      filters
        .map(([stream, filter], i) => ({ stream, filter, count: counts[i]! }))
        .filter((w) => w.count > 0),
    );
  });
  return out;
}

/**
 * A page: the subjects holding calls come in one answer per stream (as the source quota reads
 * DELIVERIES), grouped by destination; ORDERED, whose subjects are per user, only while it has
 * few enough of them, else per destination.
 */
async function scanned(jsm: JetStreamManager, ids: string[]): Promise<Map<string, Waiting[]>> {
  const out = new Map<string, Waiting[]>(ids.map((id) => [id, []]));
  const add = (id: string | undefined, stream: string, filter: (id: string) => string, count: number) => {
    const list = id === undefined ? undefined : out.get(id);
    if (!list || count === 0) return;
    const f = filter(id!);
    const w = list.find((x) => x.filter === f);
    if (w) w.count += count;
    else list.push({ stream, filter: f, count });
  };
  const [deliveries, ordered] = await Promise.all([
    subjectsIn(jsm, DELIVERIES_STREAM),
    orderedPending(jsm, () => ids),
  ]);
  for (const [subject, count] of Object.entries(deliveries)) {
    const id = destinationOfSubject(subject);
    // Partitions share one filter (one first-message lookup); the lane and legacy subjects are their own.
    const own = id !== undefined && (subject === laneSubject(id) || subject === legacyDeliverySubject(id));
    add(id, DELIVERIES_STREAM, own ? () => subject : deliverySubjects, count);
  }
  for (const [id, count] of ordered.counts) add(id, ORDERED_STREAM, orderedSubjectsOf, count);
  return out;
}

/**
 * Calls waiting on ORDERED per destination, and ORDERED's average message size. Its subjects are
 * per user: one listing of them all while few enough, else one count per destination of `ids`
 * (the PER_USER ones are enough: nothing else is stored there).
 */
export async function orderedPending(
  jsm: JetStreamManager,
  ids: () => readonly string[],
): Promise<{ counts: Map<string, number>; averageBytes: number }> {
  const counts = new Map<string, number>();
  const add = (id: string | undefined, n: number) => {
    if (id !== undefined && n > 0) counts.set(id, (counts.get(id) ?? 0) + n);
  };
  let state: { messages: number; bytes: number; num_subjects?: number };
  try {
    state = (await jsm.streams.info(ORDERED_STREAM)).state;
  } catch (err) {
    // ORDERED comes with the dispatcher of issue 24: an older one never created it.
    if (isNotFound(err)) return { counts, averageBytes: 0 };
    throw err;
  }
  if (state.messages === 0) return { counts, averageBytes: 0 };
  if ((state.num_subjects ?? Number.POSITIVE_INFINITY) > ORDERED_LISTED_UP_TO) {
    await inBatches([...ids()], async (id) =>
      add(id, await countOf(jsm, ORDERED_STREAM, orderedSubjectsOf(id))),
    );
  } else {
    for (const [subject, n] of Object.entries(await subjectsIn(jsm, ORDERED_STREAM)))
      add(orderedDestinationOf(subject), n);
  }
  return { counts, averageBytes: state.bytes / state.messages };
}

/** Messages on the subjects matching `filter` (the server's per-subject counts). */
async function countOf(jsm: JetStreamManager, stream: string, filter: string): Promise<number> {
  return Object.values(await subjectsIn(jsm, stream, filter)).reduce((n, c) => n + c, 0);
}

/** The subjects matching `filter` that hold messages, with their counts. */
async function subjectsIn(
  jsm: JetStreamManager,
  stream: string,
  filter = ">",
): Promise<Record<string, number>> {
  try {
    return (await jsm.streams.info(stream, { subjects_filter: filter })).state.subjects ?? {};
  } catch (err) {
    // ORDERED comes with the dispatcher of issue 24: an older one never created it.
    if (isNotFound(err)) return {};
    throw err;
  }
}

/**
 * When the first call stored on `filter` was first stored: a parked call carries the time it was
 * first stored on DELIVERIES (its lane message is newer), others were stored once.
 */
async function firstStored(jsm: JetStreamManager, stream: string, filter: string): Promise<Date | undefined> {
  try {
    const query = { seq: 1, next_by_subj: filter } as unknown as { seq: number };
    const m = await jsm.streams.getMessage(stream, query);
    const first = Number(m.header?.get(FIRST_TIME_HEADER));
    return Number.isFinite(first) && first > 0 && first < m.time.getTime() ? new Date(first) : m.time;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** A few at a time, not every one at once. */
async function inBatches<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += LOOKUPS_IN_FLIGHT) {
    await Promise.all(items.slice(i, i + LOOKUPS_IN_FLIGHT).map(fn));
  }
}
