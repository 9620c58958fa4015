/**
 * Batching (issue 27, docs/design/shaping.md section 7.1): calls/s to one destination whose
 * endpoint takes 50 ms per request, with `max_in_flight` 4, unbatched vs batches of 100. A backlog
 * is put on EVENTS first, then one dispatcher starts; the figure is calls/s from the first to the
 * last receipt (routing included). Target: batched ≥ 5× unbatched.
 *
 *   npm run bench -- batching        BENCH_BATCHING_CALLS=20000 npm run bench -- batching
 */
import { ConfigStore, DEFAULT_TOPOLOGY, type DestinationRecord, ensureTopology } from "@hookpost/core";
import { defaultDispatcherConfig, startDispatcher } from "@hookpost/dispatcher";
import { connect } from "nats";
import pino from "pino";
import { NatsServer } from "../test/helpers/nats-server.js";
import { Receiver } from "../test/helpers/receiver.js";
import { until } from "../test/helpers/until.js";
import { publishStored, round, storedTrack } from "./payloads.js";
import { type Figure, printIfMain } from "./table.js";

const CALLS = Number(process.env.BENCH_BATCHING_CALLS ?? 4_000);
const ENDPOINT_MS = 50;
const IN_FLIGHT = 4;

/** calls/s for one destination configuration on a fresh nats-server, and calls per request. */
async function run(
  name: string,
  batching: DestinationRecord["batching"],
  calls: number,
): Promise<{ rate: number; perRequest: number; missing: number }> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  const receiver = await Receiver.http();
  // not a wait: the endpoint's own latency, the scenario itself
  receiver.respond = () => ({ status: 200, delayMs: ENDPOINT_MS });
  try {
    await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
    const store = await ConfigStore.open(nc);
    const sourceId = `bench-${name}`;
    const at = new Date().toISOString();
    await store.putDestination({
      id: `dest-${name}`,
      name,
      sourceIds: [sourceId],
      urls: [receiver.url()],
      headers: {},
      sharedSecret: "bench-secret",
      signing: "segment",
      enabled: true,
      maxInFlight: IN_FLIGHT,
      createdAt: at,
      updatedAt: at,
      ...(batching ? { batching } : {}),
    });
    store.close();
    const js = nc.jetstream();
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        for (let i = w; i < calls; i += 16) {
          await publishStored(js, storedTrack(i, name, sourceId));
        }
      }),
    );
    const dispatcher = await startDispatcher(
      defaultDispatcherConfig(server.url, { allowedCidrs: ["127.0.0.0/8"], pullExpiresMs: 1000 }),
      { logger: pino({ level: "error" }) },
    );
    const received = () =>
      batching
        ? receiver.requests.reduce((n, r) => n + (JSON.parse(r.body.toString()) as unknown[]).length, 0)
        : receiver.requests.length;
    try {
      await until(() => received() >= calls, {
        timeout: 300_000,
        interval: 50,
        message: `${calls} calls delivered (${name})`,
      });
    } finally {
      await dispatcher.close();
    }
    const reqs = receiver.requests;
    const seconds = (reqs.at(-1)!.at - reqs[0]!.at + ENDPOINT_MS) / 1000;
    return { rate: calls / seconds, perRequest: received() / reqs.length, missing: calls - received() };
  } finally {
    await receiver.close();
    await nc.close();
    await server.stop();
  }
}

export async function benchBatching(): Promise<Figure[]> {
  // Unbatched is bounded by 4 requests per 50 ms (80 calls/s): a tenth of the calls measures it.
  const plain = await run("unbatched", undefined, Math.max(200, Math.round(CALLS / 10)));
  const batched = await run("batched", { maxCalls: 100, maxWaitMs: 200 }, CALLS);
  const config = `endpoint ${ENDPOINT_MS} ms, max_in_flight ${IN_FLIGHT}, one dispatcher`;
  return [
    {
      name: `unbatched, ${config}`,
      value: round(plain.rate),
      unit: "calls/s",
      note: `${round(plain.perRequest)} calls per request; ${plain.missing} missing`,
    },
    {
      name: `batches of 100, ${config}`,
      value: round(batched.rate),
      unit: "calls/s",
      limit: { name: "5x unbatched (target)", value: 5 * plain.rate },
      note: `${round(batched.perRequest)} calls per request; ${batched.missing} missing; ratio to unbatched ${(batched.rate / plain.rate).toFixed(1)}x`,
    },
  ];
}

await printIfMain(import.meta.url, benchBatching, true);
