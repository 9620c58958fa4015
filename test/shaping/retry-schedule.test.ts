import { durationFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { decide, policyFor, type RetryPolicy } from "@hookpost/dispatcher";
import { beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { Receiver } from "../helpers/receiver.js";
import type { IngestClient } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { useStack } from "../helpers/use-stack.js";

/** A destination's own retry schedule (issue 27): its delays, in order, within the server's bounds. */

const SERVER: RetryPolicy = { baseDelayMs: 1_000, maxDelayMs: 15 * 60_000, windowMs: 4 * 3_600_000 };

describe("retry schedule (rule)", () => {
  it("uses the destination's delays in order, repeats the last, and ends at its window", () => {
    const p = policyFor(SERVER, { retry: { windowMs: 10 * 60_000, delaysMs: [5_000, 60_000] } });
    const at = (attempt: number, elapsedMs: number) =>
      decide({
        attempt,
        retryable: true,
        retryAfterMs: undefined,
        firstTimeMs: 0,
        nowMs: elapsedMs,
        policy: p,
      });
    expect(at(1, 0)).toEqual({ action: "retry", delayMs: 5_000 });
    expect(at(2, 5_000)).toEqual({ action: "retry", delayMs: 60_000 });
    expect(at(7, 300_000)).toEqual({ action: "retry", delayMs: 60_000 });
    expect(at(9, 9 * 60_000 + 1)).toMatchObject({ action: "dead", cause: "window_exhausted" });
    // A longer Retry-After still wins.
    expect(
      decide({ attempt: 1, retryable: true, retryAfterMs: 30_000, firstTimeMs: 0, nowMs: 0, policy: p }),
    ).toEqual({ action: "retry", delayMs: 30_000 });
    // Never beyond the server's bounds, even if a replica runs with smaller ones.
    const clamped = policyFor(
      { ...SERVER, windowMs: 60_000, maxDelayMs: 2_000 },
      { retry: { windowMs: 10 * 60_000, delaysMs: [5_000] } },
    );
    expect(clamped.windowMs).toBe(60_000);
    expect(clamped.delaysMs).toEqual([2_000]);
    expect(policyFor(SERVER, {})).toBe(SERVER);
  });
});

describe("retry schedule (end to end)", () => {
  // The receiver first: its hook closes it after the stack's.
  const rx = useFixture(() => Receiver.http(), "receiver");
  const stack = useStack(STACK_OPTIONS);
  let src: { id: string; client: IngestClient };

  beforeAll(async () => {
    src = await stack.source("retry");
  });

  it("each failed attempt's next attempt is due after the destination's delay; refused outside the bounds", async () => {
    const dest = await stack.destination({
      name: "scheduled",
      sourceIds: [src.id],
      urls: [rx.url("/retry")],
      retry: { window: durationFromMs(120_000), delays: [durationFromMs(1_000), durationFromMs(2_000)] },
    });
    expect(dest.retry?.delays.map((d) => Number(d.seconds))).toEqual([1, 2]);
    let failures = 3;
    rx.respond = () => ({ status: failures-- > 0 ? 503 : 200 });
    const { messageId } = await src.client.track({ userId: "r1", event: "Retry" });
    await rx.waitFor(4, 30_000);
    const attempts = await until(
      async () => {
        const r = await stack.admin.listAttempts({ destinationId: dest.id, messageId });
        return r.attempts.length >= 4 && r.attempts;
      },
      { message: "4 attempts recorded" },
    );
    const failed = [...attempts].reverse().filter((a) => a.nextAttemptTime);
    // Due = when the attempt ended + its delay: 1 s, then 2 s, then 2 s (the last repeats).
    const gaps = failed.map((a) =>
      Math.round((timestampMs(a.nextAttemptTime!) - timestampMs(a.startTime!) - a.durationMs) / 1000),
    );
    expect(gaps).toEqual([1, 2, 2]);

    const refused = await stack.admin
      .createDestination({
        destination: {
          name: "too long",
          sourceIds: [src.id],
          urls: [rx.url("/x")],
          retry: { window: durationFromMs(48 * 3_600_000), delays: [durationFromMs(10)] },
        },
      })
      .catch((e: Error) => e.message);
    expect(refused).toMatch(/retry\.window: must be 1m to 4h/);
    expect(refused).toMatch(/retry\.delays\[0\]: must be 1s to 15m/);
  });
});
