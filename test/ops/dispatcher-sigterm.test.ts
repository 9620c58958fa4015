import type { IngestHandle } from "@hookpost/api";
import { DEAD_STREAM, DELIVERIES_STREAM, EVENTS_STREAM } from "@hookpost/core";
import { defaultDispatcherConfig, type RunningDispatcher, startDispatcher } from "@hookpost/dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestIngest } from "../helpers/ingest.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { Receiver } from "../helpers/receiver.js";
import { killIfRunning } from "../helpers/service-process.js";
import { adminClient, ingestClient, STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";
import { exitWithin, type ServiceProcess, spawnService } from "./helpers.js";

// SIGTERM to a dispatcher process in the middle of a backlog of slow deliveries: it exits within
// a bound, handing back what it could not finish in SHUTDOWN_GRACE; a second dispatcher then
// delivers every call. Duplicates are allowed (at-least-once) and reported; losses are not.

const N = 80;
const SLOW_MS = 300;

const nats = useNats();
let ingest: IngestHandle;
let receiver: Receiver;
let child: ServiceProcess | undefined;
let second: RunningDispatcher | undefined;

beforeAll(async () => {
  ingest = await startTestIngest(nats.server.url, STACK_ADMIN_TOKEN);
  receiver = await Receiver.http();
  receiver.respond = () => ({ status: 200, delayMs: SLOW_MS });
});

afterAll(async () => {
  killIfRunning(child?.proc);
  await second?.close();
  await ingest?.close();
  await receiver?.close();
});

describe("SIGTERM to a dispatcher mid-delivery", () => {
  it("exits within a bound, and a second dispatcher delivers all N calls", async () => {
    const admin = adminClient(ingest.address);
    const { writeKey, source } = await admin.createSource({ name: "backlog" });
    await admin.createDestination({
      destination: { name: "slow", urls: [receiver.url()], enabled: true, sourceIds: [source!.id] },
    });
    admin.close();

    // The backlog: N acknowledged calls, waiting on EVENTS (no dispatcher runs yet).
    const client = ingestClient(ingest.address, writeKey);
    const ids: string[] = [];
    for (let i = 0; i < N; i++)
      ids.push((await client.track({ userId: `u-${i}`, event: "Backlog" })).messageId);
    client.close();

    child = spawnService("services/dispatcher/main.ts", {
      NATS_URL: nats.server.url,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      OPS_ADDR: "off",
      // Shorter than one delivery (the receiver takes SLOW_MS): in-flight work is handed back.
      SHUTDOWN_GRACE: "150ms",
      PULL_EXPIRES: "1s",
      LOG_LEVEL: "info",
    });
    await child.waitFor("dispatcher started");
    await receiver.waitFor(20, 30_000);

    child.proc.kill("SIGTERM");
    const code = await exitWithin(child, 20_000);
    const seenByFirst = receiver.requests.length;
    expect(code).toBe(0);
    expect(child.records.some((r) => r.msg === "dispatcher stopped")).toBe(true);
    const handedBack = child.records.some(
      (r) => r.msg === "grace period over: handing in-flight deliveries back",
    );
    // It was mid-delivery: SHUTDOWN_GRACE ran out with requests in flight.
    expect(handedBack).toBe(true);
    expect(seenByFirst).toBeLessThan(N);

    // A second dispatcher takes over. The first handed back what it held, so this does not wait
    // for the consumer's ack wait (30 s) to expire.
    second = await startDispatcher(
      defaultDispatcherConfig(nats.server.url, { allowedCidrs: ["127.0.0.0/8"], pullExpiresMs: 1000 }),
      { logger: quietLogger },
    );
    await until(
      () => {
        const got = receiver.messageIds();
        return ids.every((id) => got.has(id));
      },
      { timeout: 20_000, message: "all N calls at the receiver" },
    );
    const jsm = await nats.nc.jetstreamManager();
    // Everything acknowledged: nothing pending, in flight or waiting for a retry.
    await until(
      async () => {
        // Work queues: a message leaves its stream once acknowledged.
        const deliveries = await jsm.streams.info(DELIVERIES_STREAM);
        const events = await jsm.streams.info(EVENTS_STREAM);
        return deliveries.state.messages === 0 && events.state.messages === 0;
      },
      { message: "an empty backlog" },
    );
    expect((await jsm.streams.info(DEAD_STREAM)).state.messages).toBe(0);

    const got = receiver.messageIds();
    const duplicates = receiver.requests.length - got.size;
    console.log(
      `dispatcher SIGTERM: ${N} calls, ${seenByFirst} requests before the first dispatcher exited ` +
        `(handed back in-flight work: ${handedBack}), ${receiver.requests.length} requests in all, ` +
        `${got.size} distinct, ${duplicates} duplicates`,
    );
    expect(got.size).toBe(N);
    expect(ids.filter((id) => !got.has(id))).toEqual([]);
    // Only a delivery cut off by the shutdown can arrive twice.
    expect(duplicates).toBeLessThanOrEqual(seenByFirst);
  });
});
