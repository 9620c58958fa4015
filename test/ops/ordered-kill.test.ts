import { EVENTS_STREAM } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  destination,
  type Pipeline,
  pipeline,
  publishCall,
  Receiver,
  type Reply,
  track,
} from "../dispatcher/helpers.js";
import { killIfRunning } from "../helpers/service-process.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { type ServiceProcess, spawnService } from "./helpers.js";

// kill -9 of the dispatcher process that owns a PER_USER destination while it is sending: every
// call is still delivered, and each user's calls still first arrive in the order accepted (the
// killed request is sent again by the replica that takes over; a duplicate, never a reordering).

const USERS = 4;
const PER_USER = 8;

let p: Pipeline;
const receiver = useFixture(() => Receiver.http(), "receiver");
let child: ServiceProcess | undefined;
const plans = new Map<string, Reply[]>();
/** Requests the receiver answered 200 (the hanging one is never answered). */
const finals = new WeakSet<object>();
const keyOf = (r: { headers: Record<string, unknown> }) => String(r.headers["idempotency-key"]);

beforeAll(async () => {
  p = await pipeline();
  receiver.respond = (req) => {
    const reply = plans.get(keyOf(req))?.shift() ?? { status: 200, delayMs: 40 };
    if (!reply.hang) finals.add(req);
    return reply;
  };
});

afterAll(async () => {
  killIfRunning(child?.proc);
  await p?.close();
});

describe("kill -9 of the replica sending a PER_USER destination", () => {
  it("keeps every user's order, and the replica taking over delivers the rest", async () => {
    const sourceId = "src-kill";
    const destId = "ordered-kill";
    await p.store.putDestination(
      destination({ id: destId, sourceIds: [sourceId], urls: [receiver.url("/k")], ordering: "PER_USER" }),
    );
    child = spawnService("services/dispatcher/main.ts", {
      NATS_URL: p.server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "off",
      RETRY_BASE_DELAY: "100ms",
      LOG_LEVEL: "info",
    });
    await child.waitFor("dispatcher started");

    // Interleaved users; user 0's third call hangs at the receiver: the child is killed on it.
    const accepted: { user: number; messageId: string }[] = [];
    let hanging = "";
    for (let i = 0; i < PER_USER; i++) {
      for (let u = 0; u < USERS; u++) {
        const call = track({ sourceId, userId: `user-${u}` });
        if (u === 0 && i === 2) {
          hanging = call.messageId;
          plans.set(call.messageId, [{ hang: true }]);
        }
        await publishCall(p.js, call);
        accepted.push({ user: u, messageId: call.messageId });
      }
    }
    // Routed (EVENTS is a work queue: empty once every call is in ORDERED) and in flight.
    await until(async () => (await p.jsm.streams.info(EVENTS_STREAM)).state.messages === 0, {
      message: "every call routed",
    });
    await until(() => receiver.requests.some((r) => keyOf(r) === hanging), {
      message: "the hanging request at the receiver",
    });
    const beforeKill = receiver.requests.length;
    child.proc.kill("SIGKILL");
    await child.exited;

    // The replica taking over: it owns every partition once the dead one's heartbeats are missed.
    await p.dispatcher();
    await until(
      () => {
        const done = new Set(receiver.requests.filter((r) => finals.has(r)).map(keyOf));
        return accepted.every((c) => done.has(c.messageId));
      },
      { timeout: 30_000, message: "every call delivered after the kill" },
    );
    expect(beforeKill).toBeLessThan(USERS * PER_USER);

    const requests = receiver.requests.filter((r) => r.url === "/k");
    for (let u = 0; u < USERS; u++) {
      const calls = accepted.filter((c) => c.user === u);
      for (let k = 1; k < calls.length; k++) {
        const doneAt = requests.findIndex((r) => keyOf(r) === calls[k - 1]!.messageId && finals.has(r));
        const firstAt = requests.findIndex((r) => keyOf(r) === calls[k]!.messageId);
        expect(firstAt, `user-${u}: call ${k} first sent after call ${k - 1} was delivered`).toBeGreaterThan(
          doneAt,
        );
      }
    }
    // The killed request was sent again.
    expect(requests.filter((r) => keyOf(r) === hanging).length).toBeGreaterThanOrEqual(2);
  });
});
