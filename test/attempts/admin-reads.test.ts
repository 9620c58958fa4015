import { readFileSync, writeFileSync } from "node:fs";
import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { Client, credentials } from "@grpc/grpc-js";
import { adminMetadata, createClient, writeKeyMetadata } from "@hookpost/client";
import { ADMIN_PAGE_MAX_BYTES, allPages, type HookpostError } from "@hookpost/contract";
import {
  AdminService,
  type Attempt,
  ListAttemptsRequestSchema,
  ListAttemptsResponseSchema,
  ListDeadLettersRequestSchema,
  ListDeadLettersResponseSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { defaultDispatcherConfig, type RunningDispatcher, startDispatcher } from "@hookpost/dispatcher";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { code } from "../helpers/grpc-code.js";
import { useIngestProcess } from "../helpers/ingest.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { Receiver } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";
import { rawCall } from "../ingest/harness.js";

/**
 * Issue 22, findings 4 and 5, end to end: a real ingest process (so its memory can be read), a
 * real dispatcher, nats-server and receivers. Admin reads answer bounded pages whatever is stored,
 * and a message is identified by (source, message id) in every lookup and in replay.
 */

const ADMIN_TOKEN = "admin-reads-token-0123456789abcdef";
const MIB = 1024 * 1024;
/** The figures: 504 calls of about 30 KiB, listed with page_size 1000. */
const BIG_CALLS = 504;
const BIG_BODY_CHARS = 30_000;
/** Room over the byte budget for what the estimate leaves out (framing, numbers, times). */
const ENCODING_SLACK = 64 * 1024;
/** 40 attempts of a 30 KiB call: 1.2 MiB, over the byte budget of one answer. */
const WIDE_DESTINATIONS = 40;
/** Largest pages asked for at once, to see memory per request. */
const CONCURRENT_READS = 8;

const nats = useNats();
const ingest = useIngestProcess(nats, ADMIN_TOKEN, { HTTP_ADDR: "127.0.0.1:0" });
let address: string;
/** Ingest's HTTP listener: AdminService over Connect (what the console uses). */
let httpAddress: string;
let dispatcher: RunningDispatcher;
let admin: ReturnType<typeof adminClient>;
/** A grpc-js client with every option at its default (4 MiB receive limit). */
let raw: Client;
const receivers: Receiver[] = [];
const clients: Array<{ close(): void }> = [];

const adminClient = (a: string) => createClient(AdminService, a, { metadata: adminMetadata(ADMIN_TOKEN) });

beforeAll(async () => {
  address = String(ingest.listening.address);
  httpAddress = String(
    (await ingest.child.waitFor("HTTP listening: Segment-compatible API, console, AdminService over Connect"))
      .address,
  );
  dispatcher = await startDispatcher(
    defaultDispatcherConfig(nats.server.url, {
      allowedCidrs: ["127.0.0.0/8", "::1/128"],
      retryBaseDelayMs: 100,
      pullExpiresMs: 1000,
      shutdownGraceMs: 2000,
      ackWaitMs: 5000,
    }),
    { logger: quietLogger },
  );
  admin = adminClient(address);
  clients.push(admin);
  raw = new Client(address, credentials.createInsecure());
}, 90_000);

afterAll(async () => {
  for (const c of clients) c.close();
  raw?.close();
  await dispatcher?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(respond?: Receiver["respond"]): Promise<Receiver> {
  const r = await Receiver.http();
  if (respond) r.respond = respond;
  receivers.push(r);
  return r;
}

async function source(id: string) {
  const r = await admin.createSource({ name: id, id });
  const client = createClient(IngestService, address, { metadata: writeKeyMetadata(r.writeKey) });
  clients.push(client);
  return client;
}

async function destination(id: string, sourceIds: string[], url: string) {
  const r = await admin.createDestination({
    destination: { id, name: id, sourceIds, urls: [url], enabled: true },
  });
  await waitForRevision(r.revision, [dispatcher]);
}

/** Resident and peak resident memory of a process, in MiB (Linux /proc). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)![1]) / 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/** Starts a new peak (VmHWM) from the current resident size. */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, "5");
}

/** One AdminService call `method` through the default gRPC client, with the answer's size on the wire. */
async function adminCallRaw<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  req: MessageInitShape<I>,
): Promise<{ size: number; page: MessageShape<O> }> {
  const bytes = toBinary(input, create(input, req));
  const r = await rawCall(raw, `/hookpost.v1.AdminService/${method}`, bytes, {
    authorization: `Bearer ${ADMIN_TOKEN}`,
  });
  if (r.code !== 0 || !r.bytes) throw new Error(`${method}: code ${r.code} ${r.details}`);
  return { size: r.bytes.length, page: fromBinary(output, r.bytes) };
}

const listAttemptsRaw = (req: MessageInitShape<typeof ListAttemptsRequestSchema>) =>
  adminCallRaw("ListAttempts", ListAttemptsRequestSchema, ListAttemptsResponseSchema, req);

const listDeadLettersRaw = (req: MessageInitShape<typeof ListDeadLettersRequestSchema>) =>
  adminCallRaw("ListDeadLetters", ListDeadLettersRequestSchema, ListDeadLettersResponseSchema, req);

/**
 * Every page of a list read raw, with each answer's size: `read` gets the cursor of the page to
 * read (`first`, then what `next` answers for the page before; undefined after the last page).
 */
async function everyPageRaw<P, C>(
  first: C,
  read: (cursor: C) => Promise<{ size: number; page: P }>,
  next: (page: P) => C | undefined,
): Promise<{ sizes: number[]; pages: P[] }> {
  const sizes: number[] = [];
  const pages: P[] = [];
  let cursor: C | undefined = first;
  do {
    const { size, page } = await read(cursor);
    sizes.push(size);
    pages.push(page);
    cursor = next(page);
  } while (cursor !== undefined);
  return { sizes, pages };
}

describe("admin reads are bounded", () => {
  it("ListAttempts and ListDeadLetters over 504 calls of 30 KiB answer pages under the byte budget, page through everything, and keep ingest's memory bounded", async () => {
    const client = await source("big");
    const ok = await receiver();
    const refusing = await receiver(() => ({ status: 400 }));
    await destination("big-ok", ["big"], ok.url());
    // 400 is not retried: every call is also a dead letter of this destination at once.
    await destination("big-dead", ["big"], refusing.url());
    const blob = "x".repeat(BIG_BODY_CHARS);
    const sent: string[] = [];
    for (let i = 0; i < BIG_CALLS; i += 12) {
      const n = Math.min(12, BIG_CALLS - i);
      const ids = await Promise.all(
        Array.from({ length: n }, (_, k) =>
          client.track({ userId: `u-${i + k}`, event: "Big", properties: { blob } }).then((r) => r.messageId),
        ),
      );
      sent.push(...ids);
    }
    await ok.waitFor(BIG_CALLS, 120_000);
    await refusing.waitFor(BIG_CALLS, 120_000);
    // Every attempt is in the log (it is written without waiting): count them through pages.
    let listed: Attempt[] = [];
    await until(
      async () => {
        listed = await allPages(async (pageToken) => {
          const r = await admin.listAttempts({ destinationId: "big-ok", pageSize: 1000, pageToken });
          return { items: r.attempts, nextPageToken: r.nextPageToken };
        });
        // Attempt and routing records are written without waiting: both are in once bodies join.
        return listed.length >= BIG_CALLS && listed.every((x) => x.requestBody !== "");
      },
      { timeout: 60_000, message: `${BIG_CALLS} attempts of big-ok with their bodies in the log` },
    );

    // A dead letter is stored once the 400 was read, after the receiver counted the request.
    await until(
      async () => {
        let count = 0;
        let after = 0n;
        do {
          const r = await admin.listDeadLetters({
            destinationId: "big-dead",
            pageSize: 1000,
            afterSequence: after,
          });
          count += r.deadLetters.length;
          after = r.nextAfterSequence;
        } while (after !== 0n);
        return count >= BIG_CALLS;
      },
      { timeout: 60_000, message: `${BIG_CALLS} dead letters of big-dead` },
    );

    const pid = ingest.child.proc.pid!;
    const before = memory(pid);
    resetPeak(pid);
    const attemptPages = await everyPageRaw(
      "",
      (pageToken) => listAttemptsRaw({ destinationId: "big-ok", pageSize: 1000, pageToken }),
      (page) => page.nextPageToken || undefined,
    );
    const sizes = attemptPages.sizes;
    const seen = attemptPages.pages.flatMap((page) => page.attempts);
    const letterPages = await everyPageRaw(
      0n,
      (afterSequence) => listDeadLettersRaw({ destinationId: "big-dead", pageSize: 1000, afterSequence }),
      (page) => page.nextAfterSequence || undefined,
    );
    const letterSizes = letterPages.sizes;
    const letters = letterPages.pages.flatMap((page) => page.deadLetters);
    const afterReads = memory(pid);
    // Memory per request: the same largest page asked for by several admins at once.
    const calm = memory(pid);
    resetPeak(pid);
    await Promise.all(
      Array.from({ length: CONCURRENT_READS }, (_, i) =>
        i % 2 === 0
          ? listAttemptsRaw({ destinationId: "big-ok", pageSize: 1000 })
          : listDeadLettersRaw({ destinationId: "big-dead", pageSize: 1000 }),
      ),
    );
    const concurrent = memory(pid).peak - calm.rss;
    const growth = afterReads.peak - before.rss;
    console.log(
      `admin reads: ${seen.length} attempts in ${sizes.length} pages (largest ${(Math.max(...sizes) / MIB).toFixed(2)} MiB), ` +
        `${letters.length} dead letters in ${letterSizes.length} pages (largest ${(Math.max(...letterSizes) / MIB).toFixed(2)} MiB); ` +
        `ingest RSS ${before.rss.toFixed(0)} MiB before, peak +${growth.toFixed(0)} MiB paging through both; ` +
        `+${concurrent.toFixed(0)} MiB for ${CONCURRENT_READS} first pages at once`,
    );

    // Every page under the budget (the old answer was 14.7 MiB in one page).
    for (const s of [...sizes, ...letterSizes])
      expect(s).toBeLessThanOrEqual(ADMIN_PAGE_MAX_BYTES + ENCODING_SLACK);
    expect(sizes.length).toBeGreaterThan(10);
    // Each attempt once, newest first, every one with its call's body.
    expect(new Set(seen.map((a) => a.sequence)).size).toBe(seen.length);
    expect(new Set(seen.map((a) => a.messageId))).toEqual(new Set(sent));
    expect(seen.map((a) => a.sequence)).toEqual(
      [...seen.map((a) => a.sequence)].sort((a, b) => Number(b - a)),
    );
    expect(seen.every((a) => a.requestBody.includes(blob))).toBe(true);
    expect(new Set(letters.map((l) => l.messageId))).toEqual(new Set(sent));
    expect(new Set(letters.map((l) => l.sequence)).size).toBe(letters.length);
    // Memory per request is bounded: pages of about 1 MiB, never the whole 15 MiB at once.
    expect(growth).toBeLessThan(64);
    expect(concurrent).toBeLessThan(64);

    // The console's transport shares the handlers: over Connect (JSON) the page is bounded too.
    const connect = await fetch(`http://${httpAddress}/hookpost.v1.AdminService/ListAttempts`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ destinationId: "big-ok", pageSize: 1000 }),
    });
    const connectText = await connect.text();
    expect(connect.status, connectText.slice(0, 200)).toBe(200);
    expect(Buffer.byteLength(connectText)).toBeLessThanOrEqual(ADMIN_PAGE_MAX_BYTES + ENCODING_SLACK);
    const connectPage = JSON.parse(connectText) as { attempts: unknown[]; nextPageToken?: string };
    expect(connectPage.attempts.length).toBeGreaterThan(0);
    expect(connectPage.nextPageToken).toBeTruthy();

    // The library's client (grpc-js defaults, 4 MiB limit) takes the largest page asked for.
    const first = await admin.listAttempts({ destinationId: "big-ok", pageSize: 1000 });
    expect(first.attempts.length).toBeGreaterThan(0);
    expect(first.nextPageToken).not.toBe("");
  }, 300_000);

  it("GetMessage of a call sent to many destinations keeps the newest attempts under the budget and says older ones were left out", async () => {
    const client = await source("wide");
    const r = await receiver();
    const ids = Array.from({ length: WIDE_DESTINATIONS }, (_, i) => `wide-${i}`);
    for (const id of ids) await destination(id, ["wide"], r.url());
    const blob = "y".repeat(BIG_BODY_CHARS);
    const { messageId } = await client.track({ userId: "u-wide", event: "Wide", properties: { blob } });
    await r.waitFor(WIDE_DESTINATIONS, 60_000);
    let all: Attempt[] = [];
    await until(
      async () => {
        all = await allPages(async (pageToken) => {
          const p = await admin.listAttempts({ messageId, sourceId: "wide", pageSize: 1000, pageToken });
          return { items: p.attempts, nextPageToken: p.nextPageToken };
        });
        return all.length === WIDE_DESTINATIONS;
      },
      { timeout: 30_000, message: `${WIDE_DESTINATIONS} attempts of ${messageId}` },
    );
    expect(new Set(all.map((a) => a.destinationId))).toEqual(new Set(ids));
    const story = await admin.getMessage({ messageId });
    expect(story.attemptsTruncated).toBe(true);
    expect(story.attempts.length).toBeGreaterThan(0);
    expect(story.attempts.length).toBeLessThan(WIDE_DESTINATIONS);
    // The newest ones, oldest first.
    const newest = [...all.map((a) => a.sequence)]
      .sort((a, b) => Number(a - b))
      .slice(-story.attempts.length);
    expect(story.attempts.map((a) => a.sequence)).toEqual(newest);
    expect(story.deliveries).toHaveLength(WIDE_DESTINATIONS);
  }, 120_000);

  it("ListSources, ListDestinations and ListDestinationHealth page with a capped page size", async () => {
    const r = await receiver();
    for (const id of ["pg-1", "pg-2", "pg-3"]) await admin.createSource({ name: id, id });
    for (const id of ["pd-1", "pd-2", "pd-3"]) await destination(id, ["pg-1"], r.url());
    // One item a page: the ids on it.
    const pages = await allPages(async (pageToken) => {
      const p = await admin.listDestinations({ sourceId: "pg-1", pageSize: 2, pageToken });
      return { items: [p.destinations.map((d) => d.id)], nextPageToken: p.nextPageToken };
    });
    expect(pages).toEqual([["pd-1", "pd-2"], ["pd-3"]]);
    const sources = await allPages(async (pageToken) => {
      const p = await admin.listSources({ pageSize: 1, pageToken });
      expect(p.sources.length).toBeLessThanOrEqual(1);
      return { items: p.sources.map((s) => s.id), nextPageToken: p.nextPageToken };
    });
    expect(sources).toEqual(expect.arrayContaining(["pg-1", "pg-2", "pg-3"]));
    expect(new Set(sources).size).toBe(sources.length);
    const health = await admin.listDestinationHealth({ pageSize: 1 });
    expect(health.destinations).toHaveLength(1);
    expect(health.nextPageToken).not.toBe("");
    expect(await code(admin.listSources({ pageSize: 1001 }))).toBe("INVALID_ARGUMENT");
    expect(await code(admin.listDestinations({ pageToken: "not a token" }))).toBe("INVALID_ARGUMENT");
    expect(await code(admin.listAttempts({ pageSize: 1001 }))).toBe("INVALID_ARGUMENT");
  }, 60_000);
});

describe("a message is identified by (source, message id)", () => {
  it("ListAttempts shows each source's body, GetMessage needs and honours the source, replay takes only that source's call", async () => {
    const a = await source("src-a");
    const b = await source("src-b");
    const ra = await receiver();
    const rb = await receiver();
    let refuse = true;
    const shared = await receiver(() => ({ status: refuse ? 400 : 200 }));
    await destination("dest-a", ["src-a"], ra.url());
    await destination("dest-b", ["src-b"], rb.url());
    // Both sources feed this one; it refuses (400: dead at once) until told otherwise.
    await destination("dest-shared", ["src-a", "src-b"], shared.url());
    const messageId = "same-id-1";
    // A first, so that "the first routed record of the id" is A's: what the old join picked.
    await a.track({ messageId, userId: "u-a", event: "From A" });
    await ra.waitFor(1);
    await until(
      async () => (await admin.listDeadLetters({ destinationId: "dest-shared" })).deadLetters.length === 1,
    );
    await b.track({ messageId, userId: "u-b", event: "From B" });
    await rb.waitFor(1);
    await until(
      async () => (await admin.listDeadLetters({ destinationId: "dest-shared" })).deadLetters.length === 2,
    );
    // Both webhooks carry the id as answered.
    expect(ra.requests[0]!.headers["idempotency-key"]).toBe(messageId);
    expect(rb.requests[0]!.headers["idempotency-key"]).toBe(messageId);

    let ofB: Attempt[] = [];
    await until(async () => {
      ofB = (await admin.listAttempts({ destinationId: "dest-b" })).attempts;
      return ofB.length === 1 && ofB[0]!.requestBody !== "";
    });
    expect(JSON.parse(ofB[0]!.requestBody)).toMatchObject({ event: "From B", userId: "u-b" });
    expect(ofB[0]!.requestBody).toBe(rb.requests[0]!.body.toString());
    // The shared destination: each attempt with its own source's body.
    let sharedAttempts: Attempt[] = [];
    await until(async () => {
      sharedAttempts = (await admin.listAttempts({ destinationId: "dest-shared" })).attempts;
      return sharedAttempts.length === 2 && sharedAttempts.every((x) => x.requestBody !== "");
    });
    for (const at of sharedAttempts) {
      expect(JSON.parse(at.requestBody).event).toBe(at.sourceId === "src-a" ? "From A" : "From B");
    }
    const onlyA = (await admin.listAttempts({ destinationId: "dest-shared", sourceId: "src-a" })).attempts;
    expect(onlyA.map((x) => x.sourceId)).toEqual(["src-a"]);

    // Without a source the id is ambiguous: refused, naming both sources.
    const ambiguous = await admin.getMessage({ messageId }).catch((e: HookpostError) => e);
    expect((ambiguous as HookpostError).codeName).toBe("INVALID_ARGUMENT");
    expect((ambiguous as HookpostError).message).toMatch(/src-a.*src-b/);
    const storyA = await admin.getMessage({ messageId, sourceId: "src-a" });
    expect(storyA.sourceId).toBe("src-a");
    expect(JSON.parse(storyA.body)).toMatchObject({ event: "From A" });
    expect(storyA.deliveries.map((d) => d.destinationId).sort()).toEqual(["dest-a", "dest-shared"]);
    expect(storyA.attempts.every((x) => x.sourceId === "src-a" && x.requestBody === storyA.body)).toBe(true);
    const storyB = await admin.getMessage({ messageId, sourceId: "src-b" });
    expect(JSON.parse(storyB.body)).toMatchObject({ event: "From B" });
    expect(storyB.deliveries.map((d) => d.destinationId).sort()).toEqual(["dest-b", "dest-shared"]);
    expect(await code(admin.getMessage({ messageId, sourceId: "src-none" }))).toBe("NOT_FOUND");

    // Replay scoped by source: only A's call goes out again; B's dead letter stays.
    const lettersOfB = (await admin.listDeadLetters({ destinationId: "dest-shared", sourceId: "src-b" }))
      .deadLetters;
    expect(lettersOfB.map((l) => l.sourceId)).toEqual(["src-b"]);
    refuse = false;
    const before = shared.requests.length;
    // A's sequence is not B's: refused rather than replaying another source's call.
    expect(
      await code(
        admin.replayDeadLetters({
          destinationId: "dest-shared",
          sourceId: "src-a",
          sequences: [lettersOfB[0]!.sequence],
        }),
      ),
    ).toBe("NOT_FOUND");
    const replay = await admin.replayDeadLetters({ destinationId: "dest-shared", sourceId: "src-a" });
    expect(replay.replayed).toBe(1);
    await shared.waitFor(before + 1);
    const replayed = shared.requests.slice(before);
    expect(replayed).toHaveLength(1);
    expect(JSON.parse(replayed[0]!.body.toString())).toMatchObject({ event: "From A" });
    expect(replayed[0]!.headers["idempotency-key"]).toBe(messageId);
    const left = (await admin.listDeadLetters({ destinationId: "dest-shared" })).deadLetters;
    expect(left.map((l) => l.sourceId)).toEqual(["src-b"]);
  }, 120_000);
  it("property: for any message ids sent by source A, B or both, each lookup answers that source's call alone", async () => {
    const a = await source("prop-a");
    const b = await source("prop-b");
    const r = await receiver();
    await destination("prop-shared", ["prop-a", "prop-b"], r.url());
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,6}$/), { minLength: 1, maxLength: 4 }),
        fc.array(fc.constantFrom("a", "b", "both"), { minLength: 4, maxLength: 4 }),
        async (names, who) => {
          run++;
          const sent: Array<{ id: string; source: string }> = [];
          for (const [i, name] of names.entries()) {
            const id = `p${run}-${name}`;
            const by = who[i] === "both" ? ["a", "b"] : [who[i]!];
            for (const s of by) {
              await (s === "a" ? a : b).track({ messageId: id, userId: "u", event: `${s}:${id}` });
              sent.push({ id, source: `prop-${s}` });
            }
          }
          for (const { id, source: src } of sent) {
            const event = `${src.slice(-1)}:${id}`;
            let attempts: Attempt[] = [];
            await until(
              async () => {
                attempts = (
                  await admin.listAttempts({ destinationId: "prop-shared", messageId: id, sourceId: src })
                ).attempts;
                return attempts.length === 1 && attempts[0]!.requestBody !== "";
              },
              { timeout: 20_000, message: `the attempt of ${src}/${id}` },
            );
            expect(JSON.parse(attempts[0]!.requestBody).event).toBe(event);
            const story = await admin.getMessage({ messageId: id, sourceId: src });
            expect(story.sourceId).toBe(src);
            expect(JSON.parse(story.body).event).toBe(event);
            expect(story.attempts.map((x) => x.sourceId)).toEqual([src]);
            const senders = sent.filter((x) => x.id === id).length;
            expect(await code(admin.getMessage({ messageId: id }))).toBe(
              senders > 1 ? "INVALID_ARGUMENT" : "OK",
            );
          }
        },
      ),
      { numRuns: 5 },
    );
  }, 180_000);
});
