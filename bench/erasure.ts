/**
 * Erasure (issue 26, docs/design/erasure.md): how long one pass over big stores takes. ATTEMPTS
 * holds routing records of about 0.5 KiB (read through an ordered consumer), DELIVERIES a backlog
 * on paused destinations' lanes (a work-queue stream: one lookup per message), MEMBERSHIPS one
 * audience list; one user in 1 000 is deleted. Then the idle look for pending requests, with a
 * month of done requests in the bucket.
 *
 *   npm run bench -- erasure [attempt records] [deliveries] [audience members]
 *   (defaults 200000 100000 1000000)
 */
import {
  DEFAULT_TOPOLOGY,
  DeletionStore,
  ErasureWorker,
  ensureTopology,
  eraseMemberships,
  erasePass,
  laneSubject,
  MESSAGE_ID_HEADER,
  MembershipStore,
  membershipObjectName,
  messageHash,
  NO_ERASURES,
  type RoutedRecord,
  routedSubject,
  SOURCE_ID_HEADER,
  USER_HASH_HEADER,
  userHash,
} from "@hookpost/core";
import { connect, headers, type NatsConnection } from "nats";
import pino from "pino";
import { NatsServer } from "../test/helpers/nats-server.js";
import { medianMs } from "./fill.js";
import { pipelined, round, storedTrack } from "./payloads.js";
import { type Figure, printIfMain } from "./table.js";

const SOURCE = "bench-src";
/** storedTrack(i) belongs to user-(i mod 1000): the deleted one owns one record in 1 000. */
const DELETED = userHash({ userId: "user-7" });
/** Paused destinations whose lanes hold the backlog. */
const LANES = 50;
/** Done requests in the bucket for the idle figures (about a month of a few a day). */
const DONE_REQUESTS = 100;
const IDLE_RUNS = 20;
/** ERASURE_SETTLE's default: everything stored here counts as stored before the request settled. */
const SETTLE_MS = 60_000;

const seconds = (ms: number) => round(ms / 1000, 2);

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t = performance.now();
  const value = await fn();
  return { ms: performance.now() - t, value };
}

/** A routing record of call `i`, with its body, as the router writes it. */
function routedRecord(i: number): string {
  const call = storedTrack(i, "erase", SOURCE);
  const r: RoutedRecord = {
    kind: "routed",
    messageId: call.messageId,
    sourceId: SOURCE,
    userHash: userHash(call),
    receivedAt: call.receivedAt,
    time: call.receivedAt,
    destinations: ["d1", "d2"],
    filtered: false,
    body: JSON.stringify(call),
  };
  return JSON.stringify(r);
}

/** Delivery `i` of call `i`, waiting on a paused destination's lane, with the router's headers. */
function publishDelivery(nc: NatsConnection, i: number) {
  const call = storedTrack(i, "erase", SOURCE);
  const h = headers();
  h.set(MESSAGE_ID_HEADER, call.messageId);
  h.set(SOURCE_ID_HEADER, SOURCE);
  h.set(USER_HASH_HEADER, userHash(call));
  return nc.jetstream().publish(laneSubject(`d${i % LANES}`), JSON.stringify(call), { headers: h });
}

/** `count` sorted member ids (user-0000000 …), user-7 among them, in pieces as a sync writes them. */
async function* audience(count: number): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  const ids = ["user-7"];
  for (let i = 0; i < count - 1; i++) ids.push(`user-${String(i).padStart(7, "0")}`);
  ids.sort();
  for (let i = 0; i < ids.length; i += 10_000)
    yield encoder.encode(`${ids.slice(i, i + 10_000).join("\n")}\n`);
}

export async function benchErasure(params: string[] = []): Promise<Figure[]> {
  const [attempts = 200_000, deliveries = 100_000, members = 1_000_000] = params.map(Number);
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  try {
    await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
    const js = nc.jetstream();
    const memberships = await MembershipStore.open(nc);
    const deletions = await DeletionStore.open(nc, { maxAgeMs: 30 * 86_400_000 });

    console.error(`filling ATTEMPTS with ${attempts} routing records…`);
    await pipelined(attempts, 1000, (i) =>
      js.publish(routedSubject(messageHash(`erase-${i}`)), routedRecord(i)),
    );
    const users = () => new Map([[DELETED, Date.now()]]);
    const onAttempts = await timed(() => erasePass(nc, users(), SETTLE_MS));

    console.error(`filling DELIVERIES with ${deliveries} deliveries…`);
    await pipelined(deliveries, 1000, (i) => publishDelivery(nc, i));
    const onBoth = await timed(() => erasePass(nc, users(), SETTLE_MS));

    console.error(`storing an audience of ${members} members…`);
    const name = membershipObjectName(SOURCE, "audience", "everyone");
    await memberships.write(name, audience(members), undefined);
    const onList = await timed(() => eraseMemberships(memberships, users(), SETTLE_MS));

    // What a replica does every ERASURE_INTERVAL while a request waits for its settle time.
    await deletions.create({
      requestId: "del_bench",
      userHash: DELETED,
      requestTime: new Date().toISOString(),
      notifiedSources: [SOURCE],
      erased: NO_ERASURES,
      passes: 0,
    });
    const worker = new ErasureWorker(nc, deletions, {
      intervalMs: 60_000,
      settleMs: 3_600_000,
      memberships,
      log: pino({ level: "silent" }),
    });
    const fullPass = await timed(() => worker.runOnce());
    await deletions.update("del_bench", (r) => ({ ...r, doneTime: new Date().toISOString() }));

    // Idle: a replica that has looked once answers from the bucket's state; one started afresh lists.
    for (let i = 0; i < DONE_REQUESTS; i++) {
      await deletions.create({
        requestId: `del_done${i}`,
        userHash: DELETED,
        requestTime: new Date().toISOString(),
        notifiedSources: [SOURCE],
        erased: NO_ERASURES,
        passes: 1,
        doneTime: new Date().toISOString(),
      });
    }
    await deletions.pending();
    const idle = await medianMs(IDLE_RUNS, () => deletions.pending());
    const listing = await medianMs(IDLE_RUNS, async () =>
      (await DeletionStore.open(nc, { maxAgeMs: 30 * 86_400_000 })).pending(),
    );

    const first = onAttempts.value.get(DELETED) ?? NO_ERASURES;
    const second = onBoth.value.get(DELETED) ?? NO_ERASURES;
    const deliveriesMs = onBoth.ms - onAttempts.ms;
    return [
      {
        name: `pass, ${attempts} attempt records (0.5 KiB)`,
        value: seconds(onAttempts.ms),
        unit: "s",
        note: `${Math.round(attempts / (onAttempts.ms / 1000))} records/s; erased ${first.attemptRecords}`,
      },
      {
        name: `pass, ${attempts} attempt records + ${deliveries} deliveries backlog`,
        value: seconds(onBoth.ms),
        unit: "s",
        note: `deliveries ~${Math.round(deliveries / (deliveriesMs / 1000))}/s by lookup; erased ${second.pendingCalls}`,
      },
      {
        name: `memberships, one audience of ${members} members: the user's line removed`,
        value: seconds(onList.ms),
        unit: "s",
        note: `read, hashed, rewritten; erased from ${onList.value.erased.get(DELETED) ?? 0} list`,
      },
      {
        name: "one worker pass over all of the above, nothing left to erase",
        value: seconds(fullPass.ms),
        unit: "s",
        note: "what each pass costs until the request is done",
      },
      {
        name: `idle look for pending requests, ${DONE_REQUESTS} done requests kept (median of ${IDLE_RUNS})`,
        value: round(idle, 2),
        unit: "ms",
        note: "one stream info",
      },
      {
        name: "the same look listing every request (a replica's first look)",
        value: round(listing, 2),
        unit: "ms",
        note: "what every look cost before",
      },
    ];
  } finally {
    await nc.close();
    await server.stop();
  }
}

await printIfMain(
  import.meta.url,
  () => benchErasure(process.argv.slice(2).filter((a) => /^\d+$/.test(a))),
  true,
);
