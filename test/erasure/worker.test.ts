import {
  ATTEMPTS_STREAM,
  attemptSubject,
  DEAD_STREAM,
  DEFAULT_TOPOLOGY,
  DELIVERIES_STREAM,
  type DeadLetterRecord,
  DeadLetters,
  DeletionStore,
  deliveryMsgId,
  ErasureWorker,
  ensureTopology,
  laneSubject,
  MEMBERSHIPS_BUCKET,
  MEMBERSHIPS_STREAM,
  MESSAGE_ID_HEADER,
  MembershipStore,
  membershipObjectName,
  messageHash,
  NO_ERASURES,
  objectChunkSubject,
  routedSubject,
  SOURCE_ID_HEADER,
  USER_HASH_HEADER,
  userHash,
} from "@hookpost/core";
import { headers } from "nats";
import { beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";

/*
 * The erasure worker on its own, on a real nats-server: a request recorded by a replica that then
 * crashed is picked up by another (the bucket is the to-do list), two workers at once erase
 * each record once and count it once, and records written before erasure existed (no user hash
 * header or field) are found by the call in their body. Memberships lose the user's line, and
 * chunks an upload left behind (no list refers to them) are erased.
 */

const nats = useNats();
const enc = new TextEncoder();
let deletions: DeletionStore;
let memberships: MembershipStore;
/** A short timeout: chunks no list refers to count as abandoned after 3 of them. */
const MEMBERSHIP_TIMEOUT_MS = 1000;
/** Longer than that: the pass that finds the request done has seen the leftover abandoned. */
const SETTLE_MS = 3 * MEMBERSHIP_TIMEOUT_MS + 500;

beforeAll(async () => {
  await ensureTopology(await nats.nc.jetstreamManager(), DEFAULT_TOPOLOGY);
  deletions = await DeletionStore.open(nats.nc, { maxAgeMs: 86_400_000 });
  memberships = await MembershipStore.open(nats.nc, { timeoutMs: MEMBERSHIP_TIMEOUT_MS });
});

/** A member list's content, as a write takes it. */
const lines = (text: string) =>
  (async function* () {
    yield enc.encode(text);
  })();

/** Member lists of an audience and a computed trait, and the chunks of an upload that died. */
async function storeMemberships(): Promise<void> {
  const audience = membershipObjectName("s1", "audience", "buyers");
  await memberships.write(audience, lines("gone\nstays\n"), undefined);
  const trait = membershipObjectName("s1", "trait", "score");
  await memberships.write(trait, lines("gone\t1\nstays\t2\n"), undefined);
  // A sync that died after uploading its chunks: no meta record refers to them.
  await nats.nc
    .jetstream()
    .publish(objectChunkSubject(MEMBERSHIPS_BUCKET, "DIEDMIDUPLOAD"), enc.encode("gone\n"));
}

async function membershipText(name: string): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of memberships.chunks((await memberships.info(name))!)) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString("utf8");
}

const letter = (messageId: string, body: object, hash?: string): DeadLetterRecord => ({
  messageId,
  destinationId: "d1",
  sourceId: "s1",
  body: JSON.stringify(body),
  attempts: 1,
  outcomes: [],
  reason: "400",
  firstAttemptTime: new Date().toISOString(),
  deadTime: new Date().toISOString(),
  ...(hash ? { userHash: hash } : {}),
});

async function store(userId: string, tag: string): Promise<void> {
  const js = nats.nc.jetstream();
  const dead = await DeadLetters.open(nats.nc);
  const hash = userHash({ userId });
  const track = (id: string) => ({ type: "track", userId, event: "E", properties: { tag }, messageId: id });
  // New records: the user hash in a header or field.
  await dead.record(letter(`${tag}-1`, track(`${tag}-1`), hash), `${tag}-1`);
  const h = headers();
  h.set(MESSAGE_ID_HEADER, `${tag}-2`);
  h.set(SOURCE_ID_HEADER, "s1");
  h.set(USER_HASH_HEADER, hash);
  await js.publish(laneSubject("d1"), enc.encode(JSON.stringify(track(`${tag}-2`))), {
    headers: h,
    msgID: deliveryMsgId("s1", `${tag}-2`, "d1"),
  });
  await js.publish(
    routedSubject(messageHash(`${tag}-2`)),
    enc.encode(
      JSON.stringify({
        kind: "routed",
        messageId: `${tag}-2`,
        userHash: hash,
        body: JSON.stringify(track(`${tag}-2`)),
      }),
    ),
  );
  // Older records: only the call in the body says whose it is.
  await dead.record(letter(`${tag}-3`, track(`${tag}-3`)), `${tag}-3`);
  await js.publish(
    attemptSubject("d1", messageHash(`${tag}-3`)),
    enc.encode(
      JSON.stringify({
        kind: "attempt",
        messageId: `${tag}-3`,
        requestBody: JSON.stringify(track(`${tag}-3`)),
      }),
    ),
  );
  // A deletion notice of the user is never erased.
  await dead.record(letter(`${tag}-del`, { type: "delete", userId }), `${tag}-del`);
}

async function contents(stream: string): Promise<string[]> {
  const jsm = await nats.nc.jetstreamManager();
  const { state } = await jsm.streams.info(stream);
  const out: string[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
    if (m) out.push(new TextDecoder().decode(m.data));
  }
  return out;
}

describe("the erasure worker", () => {
  it("finishes a request another replica recorded, with two workers at once counting each record once", async () => {
    await store("gone", "tag-gone");
    await store("stays", "tag-stays");
    await storeMemberships();
    // As delete-user.ts records it; the replica that did so is gone.
    const requestId = "del_worker-test";
    await deletions.create({
      requestId,
      userHash: userHash({ userId: "gone" }),
      requestTime: new Date().toISOString(),
      notifiedSources: ["s1"],
      erased: NO_ERASURES,
      passes: 0,
    });
    const workers = [0, 1].map(
      () =>
        new ErasureWorker(nats.nc, deletions, {
          intervalMs: 100,
          settleMs: SETTLE_MS,
          memberships,
          log: quietLogger,
        }),
    );
    for (const w of workers) w.start();
    try {
      const r = await until(
        async () => {
          const cur = await deletions.get(requestId);
          return cur?.doneTime ? cur : undefined;
        },
        { timeout: 20_000, message: "the request done" },
      );
      expect(r.doneTime).toBeDefined();
      // Two dead letters (header, body), one pending delivery, two log records (field, body), two
      // member lists and the leftover chunks.
      expect(r?.erased).toEqual({ deadLetters: 2, attemptRecords: 2, pendingCalls: 1, memberships: 3 });
    } finally {
      for (const w of workers) w.close();
    }
    // Of the erased user, only the deletion notice is left.
    for (const stream of [DEAD_STREAM, ATTEMPTS_STREAM, DELIVERIES_STREAM]) {
      const left = (await contents(stream)).filter((t) => t.includes("tag-gone"));
      expect(left, stream).toEqual(stream === DEAD_STREAM ? [expect.stringContaining("tag-gone-del")] : []);
    }
    expect((await contents(DEAD_STREAM)).filter((t) => t.includes("tag-stays"))).toHaveLength(3);
    expect((await contents(ATTEMPTS_STREAM)).filter((t) => t.includes("tag-stays"))).toHaveLength(2);
    // The lists keep the other member; no chunk of any version or leftover names the erased one.
    expect(await membershipText(membershipObjectName("s1", "audience", "buyers"))).toBe("stays\n");
    expect(await membershipText(membershipObjectName("s1", "trait", "score"))).toBe("stays\t2\n");
    expect((await contents(MEMBERSHIPS_STREAM)).filter((t) => /(^|\n)gone(\n|\t)/.test(t))).toEqual([]);
  });

  it("keeps a request pending while a member list is unreadable, erasing the rest meanwhile", async () => {
    const name = membershipObjectName("s1", "audience", "broken");
    const broken = await memberships.write(name, lines("gone2\nstays2\n"), undefined);
    // Its only chunk lost (removed by hand): the list is corrupt, syncs of it fail too.
    const jsm = await nats.nc.jetstreamManager();
    const chunk = await jsm.streams.getMessage(MEMBERSHIPS_STREAM, {
      last_by_subj: objectChunkSubject(MEMBERSHIPS_BUCKET, broken.nuid),
    });
    await jsm.streams.deleteMessage(MEMBERSHIPS_STREAM, chunk.seq);
    await store("gone2", "tag-gone2");
    const requestId = "del_worker-corrupt";
    const requested = Date.now();
    await deletions.create({
      requestId,
      userHash: userHash({ userId: "gone2" }),
      requestTime: new Date(requested).toISOString(),
      notifiedSources: ["s1"],
      erased: NO_ERASURES,
      passes: 0,
    });
    const worker = new ErasureWorker(nats.nc, deletions, {
      intervalMs: 100,
      settleMs: 500,
      memberships,
      log: quietLogger,
    });
    worker.start();
    try {
      // Passes that start after the settle time would finish it, were it not for the list.
      const settledPasses = await until(
        async () => (Date.now() - requested > 500 ? (await deletions.get(requestId))!.passes : undefined),
        { message: "the settle time over" },
      );
      const r = await until(
        async () => {
          const cur = (await deletions.get(requestId))!;
          return cur.passes >= settledPasses + 2 ? cur : undefined;
        },
        { timeout: 20_000, message: "two passes after the settle time" },
      );
      expect(r.doneTime).toBeUndefined();
      expect(r.erased).toEqual({ deadLetters: 2, attemptRecords: 2, pendingCalls: 1, memberships: 0 });

      // The operator removes the list (`nats object rm`): the request is done at the next pass.
      await (await nats.nc.jetstream().views.os(MEMBERSHIPS_BUCKET)).delete(name);
      await until(async () => (await deletions.get(requestId))?.doneTime, {
        timeout: 20_000,
        message: "the request done",
      });
    } finally {
      worker.close();
    }
  });
});
