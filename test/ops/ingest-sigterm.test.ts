import { setTimeout as sleep } from "node:timers/promises";
import { Code, HookpostError } from "@hookpost/contract";
import { defaultDispatcherConfig, type RunningDispatcher, startDispatcher } from "@hookpost/dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useIngestProcess } from "../helpers/ingest.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { Receiver } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { adminClient, ingestClient, STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { useNats } from "../helpers/use-nats.js";
import { exitWithin } from "./helpers.js";

// SIGTERM to an ingest process under a steady load of track calls: it exits (code 0) and every
// call it acknowledged is delivered. Calls refused or cut off by the shutdown (UNAVAILABLE,
// CANCELLED) are fine: the client was told they were not stored.

const nats = useNats();
const receiver = useFixture(() => Receiver.http(), "receiver");
const ingest = useIngestProcess(nats, STACK_ADMIN_TOKEN);
let dispatcher: RunningDispatcher;

beforeAll(async () => {
  dispatcher = await startDispatcher(
    defaultDispatcherConfig(nats.server.url, {
      allowedCidrs: ["127.0.0.0/8"],
      retryBaseDelayMs: 100,
      pullExpiresMs: 1000,
      shutdownGraceMs: 2000,
    }),
    { logger: quietLogger },
  );
});

afterAll(() => dispatcher?.close());

describe("SIGTERM to ingest under load", () => {
  it("exits with code 0 and loses no acknowledged call", async () => {
    const address = String(ingest.listening.address);
    expect(address).toMatch(/^127\.0\.0\.1:\d+$/);

    const admin = adminClient(address);
    const { writeKey, source } = await admin.createSource({ name: "load" });
    const dest = await admin.createDestination({
      destination: { name: "hook", urls: [receiver.url()], enabled: true, sourceIds: [source!.id] },
    });
    admin.close();
    // The router knows the destination before any call is sent.
    await waitForRevision(dest.revision, [dispatcher]);

    const client = ingestClient(address, writeKey);
    const acked: string[] = [];
    const failures = new Map<string, number>();
    let exited = false;
    let sigtermAt = 0;
    let ackedAfterSigterm = 0;
    const worker = async (w: number) => {
      for (let i = 0; !exited; i++) {
        try {
          const r = await client.track({ userId: `w${w}`, event: `call ${i}` }, { timeoutMs: 10_000 });
          acked.push(r.messageId);
          if (sigtermAt) ackedAfterSigterm++;
        } catch (err) {
          const code = err instanceof HookpostError ? Code[err.code] : String(err);
          failures.set(String(code), (failures.get(String(code)) ?? 0) + 1);
          await sleep(10); // not a wait: the load generator backs off after a failed call
        }
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));

    // Mid-load: the calls are flowing and being delivered.
    await until(() => acked.length >= 300, {
      timeout: 30_000,
      message: "300 acknowledged calls",
      interval: 20,
    });
    sigtermAt = Date.now();
    const ackedAtSigterm = acked.length;
    ingest.child.proc.kill("SIGTERM");
    const code = await exitWithin(ingest.child, 20_000);
    exited = true;
    await load;
    client.close();

    expect(code).toBe(0);
    expect(ingest.child.records.some((r) => r.msg === "shutting down" && r.signal === "SIGTERM")).toBe(true);
    expect(ingest.child.records.some((r) => r.msg === "ingest stopped")).toBe(true);
    // Only "not stored" answers: never an internal error or a lost acknowledgement.
    for (const c of failures.keys()) expect(["UNAVAILABLE", "CANCELLED"]).toContain(c);
    expect(new Set(acked).size).toBe(acked.length);

    await until(
      () => {
        const got = receiver.messageIds();
        return acked.every((id) => got.has(id));
      },
      { timeout: 30_000, message: "every acknowledged call at the receiver" },
    );
    const got = receiver.messageIds();
    const missing = acked.filter((id) => !got.has(id));
    console.log(
      `ingest SIGTERM: ${acked.length} acknowledged (${ackedAtSigterm} before the signal, ${ackedAfterSigterm} finished after it), ` +
        `${receiver.requests.length} delivered (${got.size} distinct), failures ${JSON.stringify(Object.fromEntries(failures))}, missing ${missing.length}`,
    );
    expect(missing).toEqual([]);
    // A call answered UNAVAILABLE was not stored; only one cut off (CANCELLED) may have been.
    const ackedSet = new Set(acked);
    const unacknowledged = [...got].filter((id) => !ackedSet.has(id));
    expect(unacknowledged.length).toBeLessThanOrEqual(failures.get("CANCELLED") ?? 0);
  });
});
