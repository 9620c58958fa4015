import type { Destination } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishCall, track } from "../dispatcher/helpers.js";
import { waitForRevision } from "../helpers/revisions.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/**
 * Auto-disable with two dispatcher replicas: a destination answering 410 Gone, or failing every
 * attempt for AUTO_DISABLE_AFTER (here 2 s), is paused with a reason, by exactly one replica. Its
 * calls keep accumulating and are all delivered once it is enabled again; nothing is dead-lettered.
 */

let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start({ dispatchers: 2, dispatcher: { autoDisableAfterMs: 2000 } });
});

afterAll(async () => {
  await stack?.close();
});

async function pausedCount(cause: string): Promise<number> {
  let n = 0;
  for (const d of stack.dispatchers) {
    const m = await d.metrics.autoDisabled.get();
    n += m.values.find((v) => v.labels.cause === cause)?.value ?? 0;
  }
  return n;
}

async function scenario(path: string, failure: number, cause: string, reason: RegExp) {
  const sourceId = (await stack.source()).id;
  const dest: Destination = await stack.destination({
    sourceIds: [sourceId],
    urls: [stack.receiver.url(path)],
  });
  const mine = () => stack.receiver.requests.filter((r) => r.url === path);
  let healthy = false;
  const restore = stack.receiver.answerAt(path, () => (healthy ? undefined : { status: failure }));
  try {
    const js = stack.nc.jetstream();
    const early = Array.from({ length: 5 }, () => track({ sourceId }));
    for (const c of early) await publishCall(js, c);
    await until(async () => !(await stack.admin.getDestination({ id: dest.id })).destination!.enabled, {
      timeout: 30_000,
      message: "the destination to be paused",
    });
    const paused = (await stack.admin.getDestination({ id: dest.id })).destination!;
    expect(paused.disabledReason).toMatch(reason);
    expect(paused.disabledTime).toBeDefined();
    // Exactly one replica wrote the pause (and counted it). It counts once its write is acknowledged,
    // which may come after the pause was read here.
    await until(async () => (await pausedCount(cause)) > 0, { message: "the pause counted" });
    expect(await pausedCount(cause)).toBe(1);

    // Calls keep accumulating while it is paused...
    const whilePaused = Array.from({ length: 5 }, () => track({ sourceId }));
    for (const c of whilePaused) await publishCall(js, c);
    const attemptsWhenPaused = mine().length;

    // ...and all go out once an operator enables it again, which clears the reason.
    healthy = true;
    const enabledAt = Date.now();
    const res = await stack.admin.updateDestination({
      destination: { id: dest.id, enabled: true },
      updateMask: { paths: ["enabled"] },
    });
    expect(res.destination!.disabledReason).toBe("");
    expect(res.destination!.disabledTime).toBeUndefined();
    await waitForRevision(res.revision, stack.dispatchers);
    const delivered = () =>
      new Set(
        mine()
          .filter((r) => r.at >= enabledAt)
          .map((r) => String(r.headers["idempotency-key"])),
      );
    await until(() => [...early, ...whilePaused].every((c) => delivered().has(c.messageId)), {
      timeout: 30_000,
      message: "every call delivered after enabling",
    });
    expect(mine().length).toBeGreaterThan(attemptsWhenPaused);
    const dead = await stack.admin.listDeadLetters({ destinationId: dest.id });
    expect(dead.deadLetters).toHaveLength(0);
  } finally {
    restore();
  }
}

describe("auto-disable", () => {
  it("pauses a destination that answers 410 Gone, keeps its calls, delivers them when enabled", async () => {
    await scenario("/gone", 410, "gone", /410 Gone/);
  });

  it("does not pause a FAILOVER destination for a 410 from one URL while another is only failing for now", async () => {
    const sourceId = (await stack.source()).id;
    const dest = await stack.destination({
      sourceIds: [sourceId],
      urls: [stack.receiver.url("/gone-first"), stack.receiver.url("/fallback")],
    });
    const goneBefore = await pausedCount("gone");
    let fallbackAnswers = 0;
    const restoreGone = stack.receiver.answerAt("/gone-first", () => ({ status: 410 }));
    // The fallback fails once (a deploy, say), then answers.
    const restoreFallback = stack.receiver.answerAt("/fallback", () =>
      fallbackAnswers++ === 0 ? { status: 503 } : undefined,
    );
    try {
      const call = track({ sourceId });
      await publishCall(stack.nc.jetstream(), call);
      // The fallback's second answer (200) is the retry: a paused destination is not retried.
      await until(() => fallbackAnswers >= 2, {
        timeout: 15_000,
        message: "the call retried, and delivered through the fallback URL",
      });
      expect(
        stack.receiver.requests.filter((r) => r.url === "/fallback").map((r) => r.headers["idempotency-key"]),
      ).toContain(call.messageId);
      expect((await stack.admin.getDestination({ id: dest.id })).destination!.enabled).toBe(true);
      expect(await pausedCount("gone")).toBe(goneBefore);
    } finally {
      restoreGone();
      restoreFallback();
    }
  });

  it("pauses a destination whose every attempt fails for AUTO_DISABLE_AFTER", async () => {
    await scenario("/failing", 500, "failing", /every attempt failed for/);
  });
});
