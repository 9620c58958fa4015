import {
  callRecordFields,
  loggedEvent,
  MAX_LOGGED_EVENT_CHARS,
  MapHeaders,
  recordFields,
  setCallHeaders,
  USER_HASH_HEADER,
} from "@hookpost/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/**
 * What attempt and dead records take from a call (user hash, type, event): read back from the
 * delivery headers the router writes (a stored delivery), or taken from the call itself (a direct
 * attempt, direct.ts). Both must agree for any event name a call may carry, JSON's lone
 * surrogates and names cut at MAX_LOGGED_EVENT_CHARS included.
 */

const TYPES = ["track", "identify", "page", "screen", "group", "alias", "delete"] as const;
/** UTF-16 units that break a naive cut or percent-encoding: pairs, halves of pairs, ASCII. */
const unit = fc.constantFrom("a", "é", "😀", "\ud83d", "\ude00", "%", " ", "\u0000");
const eventName = fc.oneof(
  fc.string({ unit, maxLength: 12 }),
  // Around the cut: the pair may straddle it.
  fc
    .tuple(
      fc.integer({ min: MAX_LOGGED_EVENT_CHARS - 3, max: MAX_LOGGED_EVENT_CHARS + 1 }),
      fc.string({ unit, maxLength: 4 }),
    )
    .map(([n, tail]) => "x".repeat(n) + tail),
);

describe("record fields of a call", () => {
  it("are the same from the router's headers and from the call", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...TYPES),
        fc.option(eventName, { nil: undefined }),
        fc.option(fc.stringMatching(/^[0-9a-f]{64}$/), { nil: undefined }),
        (type, event, user) => {
          const call = { type, event };
          const h = new MapHeaders();
          if (user !== undefined) h.set(USER_HASH_HEADER, user);
          setCallHeaders(h, call); // threw URIError for a lone surrogate: the call was never routed
          expect(recordFields(h)).toEqual(callRecordFields(call, user));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("keep an event name well-formed and at most MAX_LOGGED_EVENT_CHARS, never cut inside a pair", () => {
    fc.assert(
      fc.property(eventName, (event) => {
        const kept = loggedEvent(event);
        expect(kept.length).toBeLessThanOrEqual(MAX_LOGGED_EVENT_CHARS);
        expect(() => encodeURIComponent(kept)).not.toThrow();
        expect(loggedEvent(kept)).toBe(kept);
        // Only lone halves change (to U+FFFD), and only the end is cut.
        const whole = event.slice(0, kept.length);
        if (!/[\ud800-\udfff]/.test(whole)) expect(kept).toBe(whole);
      }),
      { numRuns: 500 },
    );
    expect(loggedEvent(`${"a".repeat(MAX_LOGGED_EVENT_CHARS - 1)}😀`)).toBe(
      "a".repeat(MAX_LOGGED_EVENT_CHARS - 1),
    );
    expect(loggedEvent("sign \ud83d up")).toBe("sign \ufffd up");
  });
});
