import { planShares, SHARE_PRESSURE } from "@hookpost/dispatcher";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";

/**
 * The cut of a stream shared by sources (DEAD's dead letters): nothing while the stream has room
 * or when one source holds every record; else about as much as brings it under 3/4, from the
 * sources over their share and never below it, a shared subject before a source's own.
 */

const RECORD = 10;
const SHARE = 10 * RECORD;

type Subjects = Record<string, [sources: string[], records: number]>;

function plan(subjects: Subjects, maxBytes: number) {
  const counts = new Map(Object.entries(subjects).map(([s, [, n]]) => [s, n]));
  const messages = [...counts.values()].reduce((a, b) => a + b, 0);
  return planShares({
    counts,
    sourcesOf: (s) => subjects[s]?.[0] ?? [],
    bytes: messages * RECORD,
    messages,
    maxBytes,
    maxBytesPerSource: SHARE,
    what: "records",
    logger: quietLogger,
  });
}

/** Each source's records after the cut. */
function left(subjects: Subjects, drops: Map<string, number>) {
  const by = new Map<string, number>();
  for (const [s, [sources, n]] of Object.entries(subjects))
    for (const id of sources) by.set(id, (by.get(id) ?? 0) + n - (drops.get(s) ?? 0));
  return by;
}

const total = (subjects: Subjects) => Object.values(subjects).reduce((a, [, n]) => a + n, 0);

/** 2 to 4 sources, each with 1 to 6 subjects of its own (0 to 60 records), maybe one shared by two. */
const streams = fc
  .record({
    own: fc.array(fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 6 }), {
      minLength: 2,
      maxLength: 4,
    }),
    shared: fc.option(fc.integer({ min: 1, max: 200 }), { nil: undefined }),
    fill: fc.double({ min: 0.5, max: 0.99, noNaN: true }),
  })
  .map(({ own, shared, fill }) => {
    const subjects: Subjects = {};
    own.forEach((records, src) => {
      records.forEach((n, k) => {
        subjects[`s${src}-${k}`] = [[`S${src}`], n];
      });
    });
    if (shared !== undefined) subjects.shared = [["S0", "S1"], shared];
    return { subjects, maxBytes: Math.ceil((total(subjects) * RECORD) / fill) };
  });

describe("planShares", () => {
  it("cuts nothing under 3/4 of the limit, nor when one source holds every record", () => {
    expect(plan({ a: [["A"], 70], b: [["B"], 4] }, 1000).size).toBe(0);
    expect(plan({ a: [["A"], 60], a2: [["A"], 39], b: [["B"], 0] }, 1000).size).toBe(0);
  });

  it("another source over its share is cut too, in proportion, never below its share", () => {
    // B kept 15 records past its share while there was room; A floods.
    const subjects: Subjects = { a: [["A"], 200], b: [["B"], 25] };
    const drops = plan(subjects, 260 * RECORD);
    const after = left(subjects, drops);
    expect(total(subjects) - [...drops.values()].reduce((x, y) => x + y, 0)).toBeLessThanOrEqual(
      SHARE_PRESSURE * 260,
    );
    expect(after.get("B")).toBeGreaterThanOrEqual(10);
    expect(drops.get("a")).toBeGreaterThan(drops.get("b") ?? 0);
  });

  it("many subjects of a record or two each lose only what is needed, not one each", () => {
    const subjects: Subjects = { b: [["B"], 5] };
    for (let k = 0; k < 150; k++) subjects[`a${k}`] = [["A"], 1];
    // 155 records; 3/4 of the limit is 153: 2 to drop.
    const drops = plan(subjects, 204 * RECORD);
    expect([...drops.values()].reduce((x, y) => x + y, 0)).toBe(2);
    expect(drops.has("b")).toBe(false);
  });

  it("a source over its share through a shared subject sheds it before another source's own", () => {
    const subjects: Subjects = { shared: [["A", "B"], 60], ownB: [["B"], 3] };
    const drops = plan(subjects, 80 * RECORD);
    expect(drops.get("shared")).toBeGreaterThan(0);
    expect(drops.has("ownB")).toBe(false);
  });

  it("for any streams: a source within its share keeps its own subjects, none goes below its share on its own, and the cut is enough", () => {
    fc.assert(
      fc.property(streams, ({ subjects, maxBytes }) => {
        const drops = plan(subjects, maxBytes);
        for (const [s, n] of drops) expect(n).toBeLessThanOrEqual(subjects[s]![1]);
        const before = left(subjects, new Map());
        const after = left(subjects, drops);
        const withRecords = [...before].filter(([, n]) => n > 0).length;
        if (total(subjects) * RECORD <= SHARE_PRESSURE * maxBytes || withRecords <= 1) {
          expect(drops.size).toBe(0);
          return;
        }
        const ownOnly = (src: string) =>
          Object.entries(subjects)
            .filter(([, [sources]]) => sources.length === 1 && sources[0] === src)
            .map(([s]) => s);
        for (const [src, n] of before) {
          // Within its share: its own subjects are never cut.
          if (n * RECORD <= SHARE) for (const s of ownOnly(src)) expect(drops.has(s)).toBe(false);
          // Its own subjects alone never take it below its share (a record of rounding aside).
          const sharedSubjects = Object.values(subjects).some(([ss]) => ss.length > 1 && ss.includes(src));
          if (!sharedSubjects)
            expect(after.get(src)! * RECORD).toBeGreaterThanOrEqual(Math.min(n * RECORD, SHARE) - RECORD);
        }
        // Enough: under 3/4, or nobody over its share has anything left to give.
        const remaining = total(subjects) - [...drops.values()].reduce((x, y) => x + y, 0);
        const anyOver = [...after].some(([, n]) => n * RECORD > SHARE + RECORD);
        expect(remaining * RECORD <= SHARE_PRESSURE * maxBytes + RECORD || !anyOver).toBe(true);
      }),
    );
  });
});
