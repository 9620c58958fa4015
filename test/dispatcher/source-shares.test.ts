import { planShares, SHARE_PRESSURE } from "@hookpost/dispatcher";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";

/**
 * The cut of a stream shared by sources (DEAD's dead letters): nothing while the stream has room
 * or when a cut protects nobody; else as much as brings it under 3/4, from the sources over their
 * share and never below it, a shared subject before a source's own.
 */

const SHARE = 100;
const RECORD = 10;

/** `subjects`: subject -> [its sources, its records]; every record is RECORD bytes. */
function plan(subjects: Record<string, [string[], number]>, maxBytes: number) {
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

/** A source's bytes after the cut (each subject loses ceil(count x fraction), as the trims do). */
function after(subjects: Record<string, [string[], number]>, shed: Map<string, number>) {
  const left = new Map<string, number>();
  for (const [s, [sources, n]] of Object.entries(subjects)) {
    const kept = n - Math.ceil(n * (shed.get(s) ?? 0));
    for (const id of sources) left.set(id, (left.get(id) ?? 0) + kept * RECORD);
  }
  return left;
}

describe("planShares", () => {
  it("cuts nothing under 3/4 of the limit, nor a lone source past it", () => {
    expect(plan({ a: [["A"], 70], b: [["B"], 4] }, 1000).size).toBe(0);
    expect(plan({ a: [["A"], 99] }, 1000).size).toBe(0);
  });

  it("brings the stream under 3/4 from the sources over their share, never below it, another's subjects kept", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 11, max: 400 }),
        fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 4 }),
        (big, small) => {
          const subjects: Record<string, [string[], number]> = { big: [["A"], big] };
          small.forEach((n, i) => {
            subjects[`s${i}`] = [[`S${i}`], n];
          });
          const total = (big + small.reduce((a, b) => a + b, 0)) * RECORD;
          const maxBytes = Math.ceil(total / 0.8);
          const shed = plan(subjects, maxBytes);
          const left = after(subjects, shed);
          // Small sources (within the share) are never cut; A is cut to 3/4, but never below its share.
          for (const key of Object.keys(subjects)) if (key !== "big") expect(shed.has(key)).toBe(false);
          if (small.every((n) => n === 0)) {
            // Nobody else's records: a cut protects nobody.
            expect(shed.size).toBe(0);
            return;
          }
          const leftTotal = [...left.values()].reduce((a, b) => a + b, 0);
          expect(leftTotal <= SHARE_PRESSURE * maxBytes || left.get("A")! <= SHARE + RECORD).toBe(true);
          expect(left.get("A")!).toBeGreaterThanOrEqual(Math.min(big * RECORD, SHARE) - RECORD);
        },
      ),
    );
  });

  it("a source over its share through a shared subject sheds it before another source's own", () => {
    const subjects: Record<string, [string[], number]> = {
      shared: [["A", "B"], 60],
      ownB: [["B"], 3],
    };
    const shed = plan(subjects, 800);
    expect(shed.get("shared")).toBeGreaterThan(0);
    expect(shed.has("ownB")).toBe(false);
  });
});
