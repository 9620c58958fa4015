import type { Logger } from "@hookpost/core";

/**
 * Shares are kept once a stream holds this much of its limit. Below it nobody's records are
 * pushed out, so a source may keep more than its share; the quarter left is far more than what
 * is written between two trims.
 */
export const SHARE_PRESSURE = 0.75;
/** Rounds of the cut's scale: shared subjects count against each of their sources. */
const SCALE_ROUNDS = 8;

export interface ShareInput {
  /** Records per subject of the stream (its per-subject counts). */
  counts: ReadonlyMap<string, number>;
  /** The sources a subject's records may belong to (a destination's sources, or a source). */
  sourcesOf: (subject: string) => readonly string[];
  /** The stream's bytes and limit: each record is counted at the stream's average. */
  bytes: number;
  messages: number;
  maxBytes: number;
  maxBytesPerSource: number;
  /** Names the share in the log line, e.g. "dead letters (SOURCE_MAX_DEAD_LETTER_BYTES)". */
  what: string;
  logger: Logger;
}

type Part = { bytes: number; subjects: string[] };
type Usage = { own: Part; shared: Part };

/**
 * How many of each subject's oldest records to drop so that a stream shared by sources keeps
 * each source's share; empty when it need not.
 *
 * Only a stream 3/4 full sheds, and only about as much as brings it back under 3/4: the sources
 * over their share, each in proportion to how far over. A source's bytes are its subjects'
 * records at the stream's average; a subject shared by sources counts against each. A source
 * over its share sheds its shared subjects first, its own only for what is left over, so another
 * source flooding a subject they share never drops the records of one it has no part in. Whole
 * records are handed out by largest remainder, so many subjects with a record or two each do not
 * each lose one (a source cut to nothing). When one source holds every record, a cut protects
 * nobody: the stream's own oldest-first drop takes only its records, and trimming would leave a
 * quarter of the stream unused.
 */
export function planShares(i: ShareInput): Map<string, number> {
  const needed = i.bytes - SHARE_PRESSURE * i.maxBytes;
  if (i.messages === 0 || i.maxBytes <= 0 || needed <= 0) return new Map();
  const average = i.bytes / i.messages;
  const usage = new Map<string, Usage>();
  for (const [subject, n] of i.counts) {
    if (n <= 0) continue;
    const sourceIds = i.sourcesOf(subject);
    for (const sourceId of sourceIds) {
      const u = usage.get(sourceId) ?? {
        own: { bytes: 0, subjects: [] },
        shared: { bytes: 0, subjects: [] },
      };
      const part = sourceIds.length === 1 ? u.own : u.shared;
      part.bytes += n * average;
      part.subjects.push(subject);
      usage.set(sourceId, u);
    }
  }
  if (usage.size <= 1) return new Map();
  const excess = (u: Usage) => u.own.bytes + u.shared.bytes - i.maxBytesPerSource;
  let totalExcess = 0;
  for (const u of usage.values()) totalExcess += Math.max(0, excess(u));
  if (totalExcess <= 0) return new Map();

  // A shared subject's records count once in what is removed but against each of its sources,
  // so the first scale removes too little: raise it until the cut covers what is needed.
  let scale = Math.min(1, needed / totalExcess);
  let fractions = fractionsAt(usage, excess, scale);
  for (let round = 1; round < SCALE_ROUNDS && scale < 1; round++) {
    let removed = 0;
    for (const [s, f] of fractions) removed += (i.counts.get(s) ?? 0) * f * average;
    if (removed >= needed * 0.999 || removed <= 0) break;
    scale = Math.min(1, (scale * needed) / removed);
    fractions = fractionsAt(usage, excess, scale);
  }

  for (const [sourceId, u] of usage)
    if (excess(u) > 0)
      i.logger.warn(
        {
          sourceId,
          bytes: Math.round(u.own.bytes + u.shared.bytes),
          share: i.maxBytesPerSource,
          dropping: Math.round(excess(u) * scale),
        },
        `stream 3/4 full and this source's ${i.what} over its share: dropping its oldest`,
      );
  return wholeRecords(fractions, i.counts);
}

/** The fraction each subject sheds at `scale`: the largest its sources ask. */
function fractionsAt(usage: Map<string, Usage>, excess: (u: Usage) => number, scale: number) {
  const shed = new Map<string, number>();
  const ask = (part: Part, fraction: number) => {
    for (const s of part.subjects) shed.set(s, Math.max(shed.get(s) ?? 0, fraction));
  };
  for (const u of usage.values()) {
    if (excess(u) <= 0) continue;
    const dropping = excess(u) * scale;
    if (u.shared.bytes > 0) ask(u.shared, Math.min(1, dropping / u.shared.bytes));
    const rest = dropping - u.shared.bytes;
    if (rest > 0 && u.own.bytes > 0) ask(u.own, Math.min(1, rest / u.own.bytes));
  }
  return shed;
}

/** Whole records per subject: the fractional cut rounded up in total, by largest remainder. */
function wholeRecords(fractions: Map<string, number>, counts: ReadonlyMap<string, number>) {
  const parts = [...fractions].map(([s, f]) => {
    const exact = (counts.get(s) ?? 0) * f;
    return { s, n: Math.floor(exact), rest: exact - Math.floor(exact), max: counts.get(s) ?? 0 };
  });
  const total = Math.ceil(parts.reduce((sum, p) => sum + p.n + p.rest, 0) - 1e-9);
  let given = parts.reduce((sum, p) => sum + p.n, 0);
  for (const p of [...parts].sort((a, b) => b.rest - a.rest)) {
    if (given >= total) break;
    if (p.n < p.max) {
      p.n++;
      given++;
    }
  }
  return new Map(parts.filter((p) => p.n > 0).map((p) => [p.s, p.n]));
}
