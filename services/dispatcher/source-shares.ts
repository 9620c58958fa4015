import type { Logger } from "@hookpost/core";

/**
 * Shares are kept once a stream holds this much of its limit. Below it nobody's records are
 * pushed out, so a source may keep more than its share; the quarter left is far more than what
 * is written between two trims.
 */
export const SHARE_PRESSURE = 0.75;

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

/**
 * What each subject sheds (its oldest records, a fraction of its count) so that a stream shared
 * by sources keeps each source's share, or nothing when it need not.
 *
 * Only a stream 3/4 full sheds, and only as much as brings it back under 3/4: the sources over
 * their share, each in proportion to how far over (never below it). A source's bytes are its
 * subjects' records at the stream's average; a subject shared by sources counts against each. A
 * source over its share sheds its shared subjects first, its own only for what is left over, so
 * another source flooding a subject they share never drops the records of one it has no part
 * in. When every subject holding records would shed, nobody's records are protected by a trim
 * (a lone source, or every source over its share): the stream's own oldest-first drop is as fair,
 * and trimming would leave a quarter of it unused.
 */
export function planShares(i: ShareInput): Map<string, number> {
  const shed = new Map<string, number>();
  const needed = i.bytes - SHARE_PRESSURE * i.maxBytes;
  if (i.messages === 0 || i.maxBytes <= 0 || needed <= 0) return shed;
  const average = i.bytes / i.messages;
  type Part = { bytes: number; subjects: string[] };
  const usage = new Map<string, { own: Part; shared: Part }>();
  for (const [subject, n] of i.counts) {
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
  const excess = (u: { own: Part; shared: Part }) => u.own.bytes + u.shared.bytes - i.maxBytesPerSource;
  let totalExcess = 0;
  for (const u of usage.values()) totalExcess += Math.max(0, excess(u));
  if (totalExcess <= 0) return shed;
  const scale = Math.min(1, needed / totalExcess);
  // The fraction each subject sheds: the largest its sources ask.
  const ask = (part: Part, fraction: number) => {
    for (const s of part.subjects) shed.set(s, Math.max(shed.get(s) ?? 0, fraction));
  };
  const over: { sourceId: string; bytes: number; dropping: number }[] = [];
  for (const [sourceId, u] of usage) {
    if (excess(u) <= 0) continue;
    const dropping = excess(u) * scale;
    over.push({ sourceId, bytes: Math.round(u.own.bytes + u.shared.bytes), dropping: Math.round(dropping) });
    if (u.shared.bytes > 0) ask(u.shared, Math.min(1, dropping / u.shared.bytes));
    const rest = dropping - u.shared.bytes;
    if (rest > 0 && u.own.bytes > 0) ask(u.own, rest / u.own.bytes);
  }
  const protectedRecords = [...i.counts].some(([s, n]) => n > 0 && !shed.has(s) && i.sourcesOf(s).length > 0);
  if (!protectedRecords) return new Map();
  for (const o of over)
    i.logger.warn(
      { ...o, share: i.maxBytesPerSource },
      `stream 3/4 full and this source's ${i.what} over its share: dropping its oldest`,
    );
  return shed;
}
