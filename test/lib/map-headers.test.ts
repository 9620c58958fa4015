import { EncodedHeaders, MapHeaders } from "@hookpost/core";
import fc from "fast-check";
import { headers, Match, type MsgHdrs } from "nats";
import { describe, expect, it } from "vitest";

/**
 * MapHeaders (the router's and parking's delivery headers) must be nats.js's MsgHdrsImpl on every
 * path: the same answers, the same wire form, the same refusals.
 */

const KEYS = ["Nats-Msg-Id", "Hookpost-Event", "hookpost-event", "traceparent", "a b", "x:y", "é", ""];
const VALUES = ["v", "two words", " padded ", "sign%20up", "a\r\nb", "ünïcode", "", "x".repeat(300)];
const MATCHES = [undefined, Match.Exact, Match.CanonicalMIME, Match.IgnoreCase];

type Op =
  | { op: "set" | "append"; k: string; v: string; m: Match | undefined }
  | { op: "delete"; k: string; m: Match | undefined };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constantFrom("set" as const, "append" as const),
    k: fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 6 })),
    v: fc.oneof(fc.constantFrom(...VALUES), fc.string({ maxLength: 8 })),
    m: fc.constantFrom(...MATCHES),
  }),
  fc.record({
    op: fc.constant("delete" as const),
    k: fc.constantFrom(...KEYS),
    m: fc.constantFrom(...MATCHES),
  }),
);

/** What `f` answered, or the error it threw. */
function outcome(f: () => unknown): unknown {
  try {
    return f();
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
}

function apply(h: MsgHdrs, o: Op): unknown {
  return outcome(() => (o.op === "delete" ? h.delete(o.k, o.m) : h[o.op](o.k, o.v, o.m)));
}

/** Everything a reader sees of headers. */
function view(h: MsgHdrs) {
  return {
    wire: Buffer.from((h as unknown as { encode(): Uint8Array }).encode()).toString(),
    keys: h.keys(),
    lookups: KEYS.flatMap((k) =>
      MATCHES.map((m) => outcome(() => [h.get(k, m), h.last(k, m), h.has(k, m), h.values(k, m)])),
    ),
  };
}

describe("MapHeaders", () => {
  it("answers, renders and refuses as nats.js's headers for any sequence of changes", () => {
    for (const make of [() => new MapHeaders(), () => new EncodedHeaders()]) {
      fc.assert(
        fc.property(fc.array(op, { maxLength: 12 }), (ops) => {
          const ours = make();
          const theirs = headers();
          for (const o of ops) {
            expect(apply(ours, o)).toBe(apply(theirs, o));
            expect(view(ours)).toEqual(view(theirs));
          }
        }),
        { numRuns: 1000 },
      );
    }
  });
});
