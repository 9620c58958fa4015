import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishCall, track } from "../dispatcher/helpers.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/**
 * Auto-disable pauses a destination that is gone or failing, never one that fails because of us
 * (docs/operations.md#auto-disable-that-keeps-events): not when one replica cannot reach an
 * endpoint the other replicas deliver to (its own network, its own settings), and not when our
 * SSRF guard refuses the address (no request was sent: the endpoint said nothing). Two dispatcher
 * replicas, AUTO_DISABLE_AFTER 4 s, a real receiver.
 */

const AFTER_MS = 4000;
let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start({ dispatchers: 1, dispatcher: { autoDisableAfterMs: AFTER_MS } });
});

afterAll(async () => {
  await stack?.close();
});

/** Sends calls to the source every 100 ms until stopped. */
function trickle(sourceId: string): { stop(): void } {
  const js = stack.nc.jetstream();
  let stopped = false;
  void (async () => {
    while (!stopped) {
      await publishCall(js, track({ sourceId })).catch(() => {});
      await new Promise((r) => setTimeout(r, 100)); // not a wait: the pace of a steady sender
    }
  })();
  return { stop: () => (stopped = true) };
}

/** Deliveries to `destination` by outcome, on the replicas given. */
async function outcomes(
  replicas: typeof stack.dispatchers,
  destination: string,
  which: string[],
): Promise<number> {
  let n = 0;
  for (const d of replicas) {
    for (const v of (await d.metrics.deliveries.get()).values) {
      if (v.labels.destination === destination && which.includes(String(v.labels.outcome))) n += v.value;
    }
  }
  return n;
}

const enabled = async (id: string) => (await stack.admin.getDestination({ id })).destination!.enabled;

/**
 * Waits until `failures()` grew at least twice AUTO_DISABLE_AFTER after it first did (every
 * attempt it counts failed for longer than the setting), or the destination was paused.
 */
async function failingFor(id: string, failures: () => Promise<number>): Promise<void> {
  const first = await until(async () => (await failures()) > 0 && Date.now(), {
    timeout: 20_000,
    message: "a first failed attempt",
  });
  let seen = await failures();
  await until(
    async () => {
      if (!(await enabled(id))) return true;
      const now = await failures();
      const grew = now > seen && Date.now() - first >= 2 * AFTER_MS;
      seen = now;
      return grew;
    },
    { timeout: 30_000, message: `failed attempts ${2 * AFTER_MS} ms after the first` },
  );
}

describe("auto-disable does not pause for our own failures", () => {
  it("one replica timing out where another delivers: not paused", async () => {
    // This replica gives up after 200 ms (a second or so: undici's timers are coarse); the
    // endpoint answers in 2 s, which the other replica (WEBHOOK_TIMEOUT 5 s) waits for: to it
    // the endpoint works.
    const patient = [...stack.dispatchers];
    const restore = stack.receiver.answerAt("/slow", () => ({ status: 200, delayMs: 2000 }));
    const src = await stack.source();
    const dest = await stack.destination({ sourceIds: [src.id], urls: [stack.receiver.url("/slow")] });
    const calls = trickle(src.id);
    // The endpoint delivers (to the patient replica) before the impatient one joins.
    await until(async () => (await outcomes(patient, dest.id!, ["delivered"])) > 0, {
      message: "a first delivery",
    });
    const impatient = await stack.addDispatcher({ webhookTimeoutMs: 200 });
    try {
      await failingFor(dest.id!, () =>
        outcomes([impatient], dest.id!, ["retry", "handed_back", "dead_letter"]),
      );
      const d = (await stack.admin.getDestination({ id: dest.id! })).destination!;
      expect(d.disabledReason).toBe("");
      expect(d.enabled).toBe(true);
    } finally {
      calls.stop();
      restore();
      await impatient.close();
      stack.dispatchers.splice(stack.dispatchers.indexOf(impatient), 1);
    }
  });

  it("every attempt refused by the SSRF guard: dead letters, not paused", async () => {
    const src = await stack.source();
    // 10.0.0.0/8 is not in WEBHOOK_ALLOWED_CIDRS: no request ever leaves.
    const dest = await stack.destination({ sourceIds: [src.id], urls: ["http://10.255.255.1:9/hook"] });
    const calls = trickle(src.id);
    try {
      await failingFor(dest.id!, () => outcomes(stack.dispatchers, dest.id!, ["dead_letter", "retry"]));
      const d = (await stack.admin.getDestination({ id: dest.id! })).destination!;
      expect(d.disabledReason).toBe("");
      expect(d.enabled).toBe(true);
      const dead = await stack.admin.listDeadLetters({ destinationId: dest.id! });
      expect(dead.deadLetters.length).toBeGreaterThan(0);
    } finally {
      calls.stop();
    }
  });
});
