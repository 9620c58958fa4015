import { DISPATCHERS_BUCKET, partitionOf } from "@hookpost/core";
// The ownership rule itself (rendezvous over the live replicas): the test picks a destination
// the frozen replica owns, so that it still owns it when it is thawed.
import { ownerOf } from "@hookpost/dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { destination, type Pipeline, pipeline, publishCall, Receiver, track } from "../dispatcher/helpers.js";
import { killIfRunning } from "../helpers/service-process.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { type ServiceProcess, spawnService } from "./helpers.js";

// A replica frozen (SIGSTOP: a long GC pause, a stopped VM) while one user's head waits for a slot
// of a PER_USER destination. The other replica takes the partition over after the frozen one's
// heartbeats are missed and delivers that head and the next. Thawed, the frozen replica still owns
// the partition in its own view: it must not send the head it read before the freeze, which would
// reach the endpoint after the user's newer call (docs/design/delivery-at-scale.md section 4).

const ORDERED_PARTITIONS = 32;

let p: Pipeline;
const receiver = useFixture(() => Receiver.http(), "receiver");
let child: ServiceProcess | undefined;
const keyOf = (r: { headers: Record<string, unknown> }) => String(r.headers["idempotency-key"]);

beforeAll(async () => {
  p = await pipeline();
});

afterAll(async () => {
  if (child) {
    child.proc.kill("SIGCONT");
    killIfRunning(child.proc);
  }
  await p?.close();
});

describe("a replica frozen while a PER_USER head waits for a slot", () => {
  it("does not send that head once thawed after another replica delivered it and the next", async () => {
    child = spawnService("services/dispatcher/main.ts", {
      NATS_URL: p.server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "off",
      RETRY_BASE_DELAY: "100ms",
      WEBHOOK_TIMEOUT: "5s",
      ORDERED_PARTITIONS: String(ORDERED_PARTITIONS),
      LOG_LEVEL: "info",
    });
    await child.waitFor("dispatcher started");
    const other = await p.dispatcher({ orderedPartitions: ORDERED_PARTITIONS });
    try {
      // Both replicas see each other; the destination lives in a partition the child owns.
      const kv = await p.nc.jetstream().views.kv(DISPATCHERS_BUCKET);
      const live = await until(
        async () => {
          const keys: string[] = [];
          for await (const k of await kv.keys()) keys.push(k);
          return keys.length === 2 && keys.sort();
        },
        { message: "two replicas registered" },
      );
      const frozen = live.find((id) => id.startsWith(`${child!.proc.pid}-`))!;
      expect(frozen).toBeDefined();
      let i = 0;
      while (ownerOf(partitionOf(`frozen${i}`, ORDERED_PARTITIONS), live) !== frozen) i++;
      const id = `frozen${i}`;
      const sourceId = "src-frozen";
      await p.putDestination(
        destination({
          id,
          sourceIds: [sourceId],
          urls: [receiver.url("/f")],
          ordering: "PER_USER",
          maxInFlight: 1,
        }),
      );

      // User y's head takes the only slot and hangs at the receiver (the first time only).
      const hanging = track({ sourceId, userId: "y" });
      let hung = false;
      receiver.respond = (req) => {
        if (keyOf(req) === hanging.messageId && !hung) {
          hung = true;
          return { hang: true };
        }
        return { status: 200 };
      };
      await publishCall(p.js, hanging);
      await until(() => receiver.requests.some((r) => keyOf(r) === hanging.messageId), {
        message: "the hanging request at the receiver",
      });

      // User x's first call is read by the child and waits for the slot; its second waits behind it.
      const x1 = track({ sourceId, userId: "x" });
      const x2 = track({ sourceId, userId: "x" });
      await publishCall(p.js, x1);
      await publishCall(p.js, x2);
      await until(
        async () => {
          const info = await p.jsm.streams.info("HOOKPOST_ORDERED", {
            subjects_filter: `hookpost.ordered.*.${id}.*`,
          });
          return Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0) === 3;
        },
        { message: "the three calls in ORDERED" },
      );
      // The child's worker must read x's head before the freeze, which is no fact seen from
      // outside (it takes milliseconds). // not a wait: a second is the margin for it.
      await new Promise((resolve) => setTimeout(resolve, 1000));

      child.proc.kill("SIGSTOP");
      // The other replica takes the partition over (3 missed heartbeats) and delivers everything.
      await until(() => receiver.requests.some((r) => keyOf(r) === x2.messageId), {
        timeout: 30_000,
        message: "x's second call delivered by the replica that took over",
      });
      const before = receiver.requests.length;
      child.proc.kill("SIGCONT");
      // Thawed: the hanging request times out at once (its timer is long overdue), which frees
      // the slot x's worker waited for.
      await until(
        () =>
          child!.records.some(
            (r) => r.msg === "delivery retry scheduled" && r.messageId === hanging.messageId,
          ),
        {
          timeout: 20_000,
          message: "the child's hanging attempt ended",
        },
      );
      // not a wait: what is asserted is that no stale x1 arrives during this time after the thaw.
      await new Promise((resolve) => setTimeout(resolve, 1500));

      const xs = receiver.requests.filter(
        (r) => r.url === "/f" && r.headers["idempotency-key"] !== hanging.messageId,
      );
      const order = xs.map((r) => (keyOf(r) === x1.messageId ? "x1" : "x2"));
      expect(
        order.lastIndexOf("x1"),
        `x's requests: ${order.join(", ")}; ${receiver.requests.length - before} after the thaw`,
      ).toBeLessThan(order.indexOf("x2"));
    } finally {
      await other.close();
    }
  }, 120_000);
});
