import type { RunningDispatcher } from "@hookpost/dispatcher";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { destination, type Pipeline, pipeline, publishCall, Receiver, type Reply, track } from "./helpers.js";

/**
 * PER_USER ordering (issue 24, docs/design/delivery-at-scale.md section 4), end to end on a real
 * nats-server and a real receiver: a user's calls reach the receiver in the order accepted
 * whatever fails, restarts or runs twice; one user's retries hold back no one else.
 */

let p: Pipeline;
let receiver: Receiver;
/** What the receiver answers per message id; absent: 200. */
const plans = new Map<string, Reply[]>();
let n = 0;
/** Requests the receiver gave a final answer: 200, or the 400 that dead-letters the call. */
const finals = new WeakSet<object>();
const answered = (r: object) => finals.has(r);

beforeAll(async () => {
  p = await pipeline();
  receiver = await Receiver.http();
  receiver.respond = (req) => {
    const reply = plans.get(keyOf(req))?.shift() ?? { status: 200 };
    if (reply.status === 200 || reply.status === 400) finals.add(req);
    return reply;
  };
});

afterAll(async () => {
  await p?.close();
  await receiver?.close();
});

const keyOf = (r: { headers: Record<string, unknown> }) => String(r.headers["idempotency-key"]);

/** A PER_USER destination on its own source, applied by every running dispatcher. */
async function orderedDestination(): Promise<{ id: string; sourceId: string }> {
  const id = `ord${++n}`;
  const sourceId = `src-ord${n}`;
  await p.putDestination(
    destination({ id, sourceIds: [sourceId], urls: [receiver.url(`/${id}`)], ordering: "PER_USER" }),
  );
  return { id, sourceId };
}

/** Publishes to EVENTS, retrying while the nats-server is restarting (an accepted call counts from its PubAck). */
async function accept(call: ReturnType<typeof track>): Promise<void> {
  await until(
    async () => {
      await publishCall(p.js, call);
      return true;
    },
    { timeout: 20_000, message: `call ${call.messageId} accepted` },
  );
}

describe("PER_USER ordering", () => {
  it("a user whose head is being retried does not hold back the destination's other users", async () => {
    const dispatcher = await p.dispatcher({ retryBaseDelayMs: 200 });
    try {
      const { id, sourceId } = await orderedDestination();
      const stuck = track({ sourceId, userId: "stuck" });
      // Fails until the test lets it through.
      let release = false;
      plans.set(stuck.messageId, []);
      const prev = receiver.respond;
      receiver.respond = (req) => (keyOf(req) === stuck.messageId && !release ? { status: 503 } : prev(req));
      const stuckLater = track({ sourceId, userId: "stuck" });
      await accept(stuck);
      await accept(stuckLater);
      const others = Array.from({ length: 20 }, (_, i) => track({ sourceId, userId: `other-${i % 5}` }));
      for (const c of others) await accept(c);

      const mine = () => receiver.requests.filter((r) => r.url === `/${id}`);
      const delivered = (mid: string) => mine().some((r) => keyOf(r) === mid);
      // Every other user's calls arrive while the stuck head is still being retried.
      await until(() => others.every((c) => delivered(c.messageId)), {
        message: "the other users' calls delivered",
      });
      const stuckTries = mine().filter((r) => keyOf(r) === stuck.messageId).length;
      expect(stuckTries).toBeGreaterThanOrEqual(1);
      // Its later call waits behind it.
      expect(delivered(stuckLater.messageId)).toBe(false);

      release = true;
      await until(() => delivered(stuckLater.messageId), { message: "the stuck user's later call" });
      const order = mine().map(keyOf);
      expect(order.lastIndexOf(stuck.messageId)).toBeLessThan(order.indexOf(stuckLater.messageId));
      receiver.respond = prev;
    } finally {
      await dispatcher.close();
    }
  });

  it("keeps each user's order through failures, 429s, restarts of dispatchers and of nats-server", async () => {
    const USERS = 3;
    type Step = {
      user: number;
      fail: "none" | "500" | "500x2" | "429" | "400";
      restart: "none" | "dispatcher" | "nats";
    };
    const step = fc.record({
      user: fc.integer({ min: 0, max: USERS - 1 }),
      fail: fc.constantFrom<Step["fail"]>("none", "none", "none", "500", "500", "500x2", "429", "400"),
      restart: fc.constantFrom<Step["restart"]>(
        ...Array<Step["restart"]>(14).fill("none"),
        "dispatcher",
        "nats",
      ),
    });
    // Two replicas at once all along; a restart closes one and starts it again.
    const replicas: RunningDispatcher[] = [await p.dispatcher(), await p.dispatcher()];
    let natsRestarts = 0;
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 8, maxLength: 18 }), async (steps) => {
          run++;
          const { id, sourceId } = await orderedDestination();
          const accepted: { user: number; messageId: string; dead: boolean }[] = [];
          for (const [i, s] of steps.entries()) {
            const call = track({ sourceId, userId: `user-${s.user}` });
            plans.set(call.messageId, replies(s.fail));
            await accept(call);
            accepted.push({ user: s.user, messageId: call.messageId, dead: s.fail === "400" });
            // The first run restarts nats-server at least once, whatever was drawn.
            const restart = run === 1 && i === Math.floor(steps.length / 2) ? "nats" : s.restart;
            if (restart === "dispatcher") {
              const k = i % replicas.length;
              await replicas[k]!.close();
              replicas[k] = await p.dispatcher();
            } else if (restart === "nats") {
              await p.server.restart();
              natsRestarts++;
            }
          }

          const mine = () => receiver.requests.filter((r) => r.url === `/${id}`);
          const dead = new Set<string>();
          await until(
            async () => {
              const seen = new Set(
                mine()
                  .filter((r) => answered(r))
                  .map(keyOf),
              );
              for (const l of await p.deadLetters.list(id)) dead.add(l.messageId);
              // A 400 dead-letters the call, unless a second sender (a restart while the dead
              // letter was being written) got the 200 that follows it: delivered then.
              return accepted.every((c) => seen.has(c.messageId) || (c.dead && dead.has(c.messageId)));
            },
            // Generous: after a nats-server restart the worker may wait on the router's ack floor
            // (a lost ack comes back after ACK_WAIT); order, not speed, is the property here.
            { timeout: 90_000, message: `every call of run ${run} delivered or dead-lettered` },
          ).catch(async (err: Error) => {
            const seen = new Set(
              mine()
                .filter((r) => answered(r))
                .map(keyOf),
            );
            const missing = accepted.filter(
              (c) => !(seen.has(c.messageId) || (c.dead && dead.has(c.messageId))),
            );
            const info = await p.jsm.streams.info("HOOKPOST_ORDERED", { subjects_filter: ">" });
            throw new Error(
              `${err.message}; missing ${JSON.stringify(missing)}; tried ${JSON.stringify(
                mine().map((r) => [keyOf(r), answered(r)]),
              )}; stored ${JSON.stringify(info.state.subjects)}`,
            );
          });

          // Per user: a call's first request comes after the earlier call's final answer.
          const requests = mine();
          for (let u = 0; u < USERS; u++) {
            const calls = accepted.filter((c) => c.user === u);
            for (let k = 1; k < calls.length; k++) {
              const before = calls[k - 1]!.messageId;
              const after = calls[k]!.messageId;
              const doneAt = requests.findIndex((r) => keyOf(r) === before && answered(r));
              const firstAt = requests.findIndex((r) => keyOf(r) === after);
              expect(doneAt, `user-${u}: ${before} got its final answer`).toBeGreaterThanOrEqual(0);
              expect(firstAt, `user-${u}: ${after} first sent after ${before} was done`).toBeGreaterThan(
                doneAt,
              );
            }
          }
        }),
        { numRuns: 3, endOnFailure: true },
      );
      expect(natsRestarts).toBeGreaterThanOrEqual(1);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
    }
  }, 360_000);
  // Last in this file: it shortens the retry window (and with it the streams' max age).
  it("a paused destination's calls wait unsent and are dead-lettered at the window; switching to UNORDERED still delivers what waits in order; a delete purges", async () => {
    let dispatcher = await p.dispatcher({
      topology: { retryWindowMs: 1500, retryMaxDelayMs: 500 } as never,
    });
    try {
      const stored = async (id: string) => {
        const info = await p.jsm.streams.info("HOOKPOST_ORDERED", {
          subjects_filter: `hookpost.ordered.*.${id}.*`,
        });
        return Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
      };
      const hits = (id: string) => receiver.requests.filter((r) => r.url === `/${id}`);

      // Paused: nothing is sent; at the window's end each call becomes a dead letter, oldest first.
      const paused = await orderedDestination();
      const rec = p.store.destination(paused.id)!;
      await p.putDestination({ ...rec, enabled: false });
      const waiting = [track({ sourceId: paused.sourceId }), track({ sourceId: paused.sourceId })];
      for (const c of waiting) await accept(c);
      const letters = await until(
        async () => {
          const l = await p.deadLetters.list(paused.id);
          return l.length === waiting.length && l;
        },
        { message: "the paused destination's calls dead-lettered" },
      );
      expect(letters.map((l) => l.messageId)).toEqual(waiting.map((c) => c.messageId));
      expect(letters[0]!.reason).toMatch(/disabled for the whole retry window/);
      expect(hits(paused.id)).toHaveLength(0);
      expect(await stored(paused.id)).toBe(0);

      // The calls below must still wait when the destination is changed: with the 1.5 s window
      // they became dead letters when a loaded machine took longer than that between storing and
      // changing. A dispatcher with the usual window (which puts the streams' max age back).
      await dispatcher.close();
      dispatcher = await p.dispatcher();

      // PER_USER -> UNORDERED while calls wait in ORDERED: they are still delivered, in order.
      const switched = await orderedDestination();
      const sw = p.store.destination(switched.id)!;
      await p.putDestination({ ...sw, enabled: false });
      const before = [track({ sourceId: switched.sourceId }), track({ sourceId: switched.sourceId })];
      for (const c of before) await accept(c);
      await until(async () => (await stored(switched.id)) === before.length, { message: "calls in ORDERED" });
      const { ordering: _o, ...unordered } = sw;
      await p.putDestination({ ...unordered, enabled: true });
      const after = track({ sourceId: switched.sourceId });
      await accept(after);
      await until(
        () => [...before, after].every((c) => hits(switched.id).some((r) => keyOf(r) === c.messageId)),
        {
          message: "the switched destination's calls delivered",
        },
      );
      const order = hits(switched.id).map(keyOf);
      expect(order.indexOf(before[0]!.messageId)).toBeLessThan(order.indexOf(before[1]!.messageId));

      // Deleted with calls waiting: they are purged from ORDERED.
      const gone = await orderedDestination();
      const g = p.store.destination(gone.id)!;
      await p.putDestination({ ...g, enabled: false });
      await accept(track({ sourceId: gone.sourceId, userId: "x" }));
      await until(async () => (await stored(gone.id)) === 1, { message: "the call in ORDERED" });
      await p.applied(await p.store.deleteDestination(gone.id));
      await until(async () => (await stored(gone.id)) === 0, {
        message: "the deleted destination's calls purged",
      });
      expect(hits(gone.id)).toHaveLength(0);
    } finally {
      await dispatcher.close();
    }
  });
});

/** The receiver's answers to one call, in order of its attempts. */
function replies(fail: "none" | "500" | "500x2" | "429" | "400"): Reply[] {
  switch (fail) {
    case "none":
      return [];
    case "500":
      return [{ status: 500 }];
    case "500x2":
      return [{ status: 500 }, { status: 500 }];
    case "429":
      return [{ status: 429, headers: { "retry-after": "1" } }];
    case "400":
      return [{ status: 400 }];
  }
}
