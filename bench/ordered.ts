/**
 * PER_USER ordering (issue 24): throughput to one destination, ordered vs unordered. A backlog of
 * calls is put on EVENTS first, then one dispatcher starts; the figure is calls/s from the first
 * to the last receipt (routing included). Ordered: 100 users (heads in parallel) and 1 user (one
 * head at a time: a read, the POST, a delete per call). Every part runs in this process (nats-server
 * aside), so the figures compare the two paths more than they size a deployment.
 *
 *   npm run bench -- ordered        BENCH_ORDERED_CALLS=20000 npm run bench -- ordered
 */
import { ConfigStore, DEFAULT_TOPOLOGY, ensureTopology } from "@hookpost/core";
import { defaultDispatcherConfig, startDispatcher } from "@hookpost/dispatcher";
import { connect } from "nats";
import pino from "pino";
import { NatsServer } from "../test/helpers/nats-server.js";
import { Receiver } from "../test/helpers/receiver.js";
import { until } from "../test/helpers/until.js";
import { publishStored, round, storedTrack } from "./payloads.js";
import { type Figure, printIfMain } from "./table.js";

const CALLS = Number(process.env.BENCH_ORDERED_CALLS ?? 5_000);

interface Case {
  name: string;
  ordered: boolean;
  users: number;
}

const CASES: Case[] = [
  { name: "unordered, 100 users", ordered: false, users: 100 },
  { name: "per-user, 100 users", ordered: true, users: 100 },
  { name: "per-user, 1 user", ordered: true, users: 1 },
];

/** One case on a fresh nats-server: calls/s from first to last receipt, and whether order held. */
async function runCase(c: Case, index: number): Promise<{ rate: number; inOrder: boolean; dup: number }> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  const receiver = await Receiver.http();
  try {
    const jsm = await nc.jetstreamManager();
    await ensureTopology(jsm, DEFAULT_TOPOLOGY);
    const store = await ConfigStore.open(nc);
    const sourceId = `bench-src-${index}`;
    const at = new Date().toISOString();
    await store.putDestination({
      id: `bench-${index}`,
      name: c.name,
      sourceIds: [sourceId],
      urls: [receiver.url()],
      headers: {},
      signing: "segment",
      enabled: true,
      createdAt: at,
      updatedAt: at,
      ...(c.ordered ? { ordering: "PER_USER" as const } : {}),
    });
    store.close();
    const js = nc.jetstream();
    const tag = `o${index}`;
    // Call i belongs to user i mod users; each user's calls are published one after the other,
    // so a user's accepted order is the order of i.
    await Promise.all(
      Array.from({ length: c.users }, async (_, u) => {
        for (let i = u; i < CALLS; i += c.users) {
          await publishStored(js, { ...storedTrack(i, tag, sourceId), userId: `user-${u}` });
        }
      }),
    );
    const dispatcher = await startDispatcher(
      defaultDispatcherConfig(server.url, { allowedCidrs: ["127.0.0.0/8"], pullExpiresMs: 1000 }),
      { logger: pino({ level: "error" }) },
    );
    try {
      await until(() => receiver.messageIds().size >= CALLS, {
        timeout: 300_000,
        interval: 50,
        message: `${CALLS} calls delivered (${c.name})`,
      });
    } finally {
      await dispatcher.close();
    }
    const reqs = receiver.requests;
    const seconds = (reqs.at(-1)!.at - reqs[0]!.at) / 1000;
    // Receipt order per user against publish order (by the call index in its message id).
    const last = new Map<string, number>();
    let inOrder = true;
    const seen = new Set<string>();
    for (const r of reqs) {
      const id = String(r.headers["idempotency-key"]);
      if (seen.has(id)) continue;
      seen.add(id);
      const i = Number(id.split("-").at(-1));
      const user = String(i % c.users);
      if ((last.get(user) ?? -1) > i) inOrder = false;
      last.set(user, i);
    }
    return { rate: CALLS / seconds, inOrder, dup: reqs.length - seen.size };
  } finally {
    await receiver.close();
    await nc.close();
    await server.stop();
  }
}

export async function benchOrdered(): Promise<Figure[]> {
  const out: Figure[] = [];
  for (const [i, c] of CASES.entries()) {
    const r = await runCase(c, i);
    out.push({
      name: `${c.name}, ${CALLS} calls`,
      value: round(r.rate),
      unit: "calls/s",
      note: `${c.ordered ? (r.inOrder ? "each user in order" : "ORDER BROKEN") : "no order asked"}; ${r.dup} duplicates`,
    });
  }
  return out;
}

await printIfMain(import.meta.url, benchOrdered, true);
