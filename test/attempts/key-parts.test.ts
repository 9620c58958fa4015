import { keyParts, L0_KEY_BYTES, L1_KEY_BYTES, readKeyPart } from "@hookpost/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/**
 * The index's key blobs (docs/design/attempt-search.md): every key entry lands once, in the part
 * its top bits name, each part sorted by (key, offset), whatever the mix of distinct keys and of
 * keys shared by many records (one user's calls).
 */
describe("key parts of the attempt index", () => {
  const entry = (maxOff: number) =>
    fc.record({
      // Few distinct values too, so that runs of one hi and of one whole key are long.
      hi: fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.constantFrom(0, 7, 0xffff)),
      lo: fc.oneof(fc.integer({ min: 0, max: 0xffffffff }), fc.constantFrom(0, 1, 0xffffffff)),
      off: fc.integer({ min: 0, max: maxOff }),
    });
  const levels = [
    { name: "level 0", count: 16, shift: 12, bytes: L0_KEY_BYTES, maxOff: 0xffff },
    { name: "level 1", count: 1024, shift: 6, bytes: L1_KEY_BYTES, maxOff: 65_536 * 64 - 1 },
  ];

  for (const l of levels) {
    it(`${l.name}: each entry once, in its part, in (key, offset) order`, () => {
      fc.assert(
        fc.property(
          fc.array(entry(l.maxOff), { maxLength: 400 }),
          fc.array(entry(l.maxOff), { maxLength: 5 }),
          fc.integer({ min: 0, max: 100 }),
          (mixed, hot, copies) => {
            // A few keys repeated many times: long runs of one key beside the rest.
            const all = [
              ...mixed,
              ...hot.flatMap((e) =>
                Array.from({ length: copies }, (_, i) => ({ ...e, off: (e.off + i) % (l.maxOff + 1) })),
              ),
            ];
            const parts = keyParts(
              all.map((e) => e.hi),
              all.map((e) => e.lo),
              all.map((e) => e.off),
              l.count,
              l.shift,
              l.bytes,
            );
            expect(parts).toHaveLength(l.count);
            const read = parts.map((p) => readKeyPart(p, l.bytes));
            read.forEach((r, p) => {
              for (const h of r.hi) expect(h >>> l.shift).toBe(p);
            });
            const got = read.flatMap((r) => r.hi.map((hi, i) => [hi, r.lo[i]!, r.off[i]!]));
            const want = all
              .map((e) => [e.hi, e.lo, e.off])
              .sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]! || a[2]! - b[2]!);
            expect(got).toEqual(want);
          },
        ),
        { numRuns: 200 },
      );
    });
  }
});
