import { Code, MAX_REPLAY_SEQUENCES } from "@hookpost/contract";
import { beforeAll, describe, expect, it } from "vitest";
import { failure, fields, useHarness } from "./harness.js";

// Filters of admin reads and replays get a bound and a clear error, never a silent nothing.
// ReplayDeadLetters looks every given sequence up in DEAD, one at a time, before it replays
// anything: the list is bounded, and a sequence no stream can hold is a field violation, not a
// NATS error answered as UNAVAILABLE ("retry") or a number silently rounded to another one.

const h = useHarness();
let destinationId: string;

beforeAll(async () => {
  const source = await h.source("web");
  const created = await h.admin.createDestination({
    destination: { name: "hook", sourceIds: [source.id], urls: ["https://hooks.example.com/in"] },
  });
  destinationId = created.destination!.id;
});

describe("ReplayDeadLetters sequences", () => {
  it(`refuses more than MAX_REPLAY_SEQUENCES (${MAX_REPLAY_SEQUENCES}) before looking any up`, async () => {
    const sequences = Array.from({ length: MAX_REPLAY_SEQUENCES + 1 }, (_, i) => BigInt(i + 1));
    const started = performance.now();
    const err = await failure(h.admin.replayDeadLetters({ destinationId, sequences }));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(fields(err)).toEqual(["sequences"]);
    expect(err.message).toContain(`at most ${MAX_REPLAY_SEQUENCES}`);
    // Refused up front: no lookup per sequence (about 0.5 ms each).
    expect(performance.now() - started).toBeLessThan(300);
  });

  it("refuses 0 and sequences beyond 2^53 - 1 by their index", async () => {
    for (const bad of [0n, 2n ** 53n + 1n, 2n ** 64n - 1n]) {
      const err = await failure(h.admin.replayDeadLetters({ destinationId, sequences: [1n, bad] }));
      expect(err.code, `${bad}: ${err.message}`).toBe(Code.INVALID_ARGUMENT);
      expect(fields(err)).toEqual(["sequences[1]"]);
    }
  });

  it("ListDeadLetters refuses an after_sequence no response gave (NATS cannot go past 2^64 - 1)", async () => {
    for (const req of [{ destinationId }, {}]) {
      const err = await failure(h.admin.listDeadLetters({ ...req, afterSequence: 2n ** 64n - 1n }));
      expect(err.code, err.message).toBe(Code.INVALID_ARGUMENT);
      expect(fields(err)).toEqual(["after_sequence"]);
    }
  });

  it("names at most a few missing sequences in its NOT_FOUND", async () => {
    const sequences = Array.from({ length: MAX_REPLAY_SEQUENCES }, (_, i) => BigInt(i + 1));
    const err = await failure(h.admin.replayDeadLetters({ destinationId, sequences }));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.message).toMatch(/with sequence 1, 2, 3, .* and \d+ more/);
    expect(err.message.length).toBeLessThan(500);
  });
});

describe("time filters", () => {
  // Year 31 690 and year -29 719: a JavaScript Date cannot hold them, so they used to become NaN
  // and match nothing: an empty answer, or "replayed 0", for a typo.
  const far = [
    { seconds: 10n ** 12n, nanos: 0 },
    { seconds: -(10n ** 12n), nanos: 0 },
  ];

  it("refuses a since or until outside 0001..9999 by name", async () => {
    for (const t of far) {
      const calls: [string, Promise<unknown>][] = [
        ["since", h.admin.listAttempts({ destinationId, since: t })],
        ["since", h.admin.searchAttempts({ since: t })],
        ["until", h.admin.searchAttempts({ until: t })],
        ["since", h.admin.replayDeadLetters({ destinationId, since: t })],
        ["until", h.admin.replayDeadLetters({ destinationId, until: t })],
      ];
      for (const [field, call] of calls) {
        const err = await failure(call);
        expect(err.code, `${field} ${t.seconds}: ${err.message}`).toBe(Code.INVALID_ARGUMENT);
        expect(fields(err)).toEqual([field]);
      }
    }
  });

  it("still takes times in range", async () => {
    const since = { seconds: BigInt(Math.floor(Date.now() / 1000) - 3600), nanos: 0 };
    await h.admin.listAttempts({ destinationId, since });
    await h.admin.searchAttempts({ since, until: { seconds: since.seconds + 7200n, nanos: 0 } });
    expect((await h.admin.replayDeadLetters({ destinationId, since })).replayed).toBe(0);
  });
});
