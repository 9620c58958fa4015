import { createServer, type Server, type Socket } from "node:net";
import { AttemptOutcome } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { DestinationRecord } from "@hookpost/core";
import {
  DEFAULT_TOPOLOGY,
  MESSAGE_ID_HEADER,
  NOT_RENDERED_HEADER,
  partitionSubject,
  SOURCE_ID_HEADER,
  type TopologySettings,
} from "@hookpost/core";
import { headers as natsHeaders } from "nats";
import { afterAll, describe, expect, it } from "vitest";
import { waitForRevision } from "../helpers/revisions.js";
import type { Stack } from "../helpers/stack.js";
import { stackWithStore } from "../helpers/stack-store.js";
import { until } from "../helpers/until.js";
import { destination } from "./helpers.js";

/**
 * Accepted means delivered or visibly dead-lettered (issue 22): a request that cannot even be
 * prepared, or an answer that is not HTTP as we know it, is an attempt record with its reason and
 * is retried within the retry window (5 s here), never acknowledged into nothing nor handed back
 * silently for ever. Real ingest, nats-server, dispatcher, and real (raw TCP) receivers.
 */

const topology: TopologySettings = { ...DEFAULT_TOPOLOGY, retryWindowMs: 5000, retryMaxDelayMs: 1000 };
const servers: Server[] = [];

const t = stackWithStore({ ingest: { topology }, dispatcher: { topology, retryBaseDelayMs: 200 } });

afterAll(() => {
  for (const s of servers) s.close();
});

async function attemptsOf(destinationId: string, done: (a: Attempts) => boolean, what: string) {
  let list: Attempts = [];
  await until(
    async () => {
      list = (await t.stack.admin.listAttempts({ destinationId, pageSize: 1000 })).attempts;
      return done(list);
    },
    { timeout: 20_000, message: what },
  );
  // Newest first in the API: oldest first reads like the story.
  return [...list].reverse();
}
type Attempts = Awaited<ReturnType<Stack["admin"]["listAttempts"]>>["attempts"];

async function deadLettersOf(destinationId: string) {
  let letters: Awaited<ReturnType<Stack["admin"]["listDeadLetters"]>>["deadLetters"] = [];
  await until(
    async () => {
      letters = (await t.stack.admin.listDeadLetters({ destinationId })).deadLetters;
      return letters.length > 0;
    },
    { timeout: 20_000, message: `a dead letter of ${destinationId}` },
  );
  return letters;
}

/** A raw HTTP/1.1 server answering whatever status line `statusLine()` says, then closing. */
async function rawServer(statusLine: () => string): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer((socket: Socket) => {
    let buffered = "";
    socket.on("data", (chunk) => {
      buffered += chunk.toString("latin1");
      const end = buffered.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/content-length:\s*(\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      requests++;
      socket.end(`HTTP/1.1 ${statusLine()}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok`);
    });
    socket.on("error", () => {});
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, requests: () => requests };
}

/**
 * A destination written straight into the bucket, behind the admin API's back (which would
 * refuse it), and one call to it: resolves once it is a dead letter, with its attempts.
 */
async function sendToStored(id: string, extra: Partial<DestinationRecord>) {
  const src = await t.stack.source(id);
  const revision = await t.store.putDestination(
    destination({ id, sourceIds: [src.id], urls: [t.stack.receiver.url()], ...extra }),
  );
  await waitForRevision(revision, t.stack.dispatchers);
  await t.stack.waitForDestination(id);
  const { messageId } = await src.client.track({ userId: "u-1", event: "Signed Up" });
  const letters = await deadLettersOf(id);
  const attempts = await attemptsOf(id, (l) => l.length >= 2, `two attempts of ${id}`);
  // Never sent: the receiver saw nothing of it.
  expect(t.stack.receiver.requests.filter((r) => r.headers["idempotency-key"] === messageId)).toHaveLength(0);
  return { messageId, letters, attempts };
}

describe("a failure before the request is sent", () => {
  it("a destination the dispatcher cannot sign for (written straight into the bucket) leaves not-sent attempts with the reason, then a dead letter at the retry window", async () => {
    // standard-webhooks needs whsec_ secrets: only a record stored behind the API (or by an
    // older version) can hold this.
    const { messageId, letters, attempts } = await sendToStored("unsignable", {
      signing: "standard-webhooks",
      sharedSecret: "demo-secret",
    });
    for (const a of attempts) {
      expect(a.messageId).toBe(messageId);
      expect(a.outcome).toBe(AttemptOutcome.NOT_SENT);
      expect(a.status).toBe(0);
      expect(a.retryable).toBe(true);
      expect(a.reason).toMatch(/^not sent: signing failed: .*whsec_/);
      expect(a.reason).not.toContain("demo-secret");
    }
    // Retried: every attempt but the last says when the next comes.
    expect(attempts.slice(0, -1).every((a) => a.nextAttemptTime !== undefined)).toBe(true);

    expect(letters).toHaveLength(1);
    const [letter] = letters;
    expect(letter!.messageId).toBe(messageId);
    expect(letter!.reason).toMatch(/retry window of 5s exhausted; last: not sent: signing failed/);
    expect(letter!.outcomes[0]?.error).toBe("not_sent");
  });

  it("a header value no HTTP request can carry (written straight into the bucket) is a not-sent attempt, retried, then a dead letter", async () => {
    const { messageId, letters, attempts } = await sendToStored("bad-header", {
      headers: { "X-Team": "growth\r\nX-Injected: yes" },
    });
    for (const a of attempts) {
      expect(a.outcome).toBe(AttemptOutcome.NOT_SENT);
      expect(a.retryable).toBe(true);
      expect(a.reason).toMatch(/^not sent: invalid request: /);
      // Header values may be credentials: the reason names the header, never its value.
      expect(a.reason).not.toContain("growth");
    }
    expect(letters[0]?.messageId).toBe(messageId);
    expect(letters[0]?.reason).toMatch(/retry window of 5s exhausted; last: not sent: invalid request/);
  });

  /**
   * What the router publishes when renderBody throws: the stored call, marked. (No call that
   * ingest accepts makes renderBody throw today, so the mark is put here by hand.)
   */
  const publishUnrenderable = async (destinationId: string, sourceId: string, messageId: string) => {
    const h = natsHeaders();
    h.set(MESSAGE_ID_HEADER, messageId);
    h.set(SOURCE_ID_HEADER, sourceId);
    h.set(NOT_RENDERED_HEADER, "unknown call type: teleport");
    await t.stack.nc
      .jetstream()
      .publish(partitionSubject(0, destinationId), '{"type":"teleport"}', { headers: h });
  };

  it("a call whose body the router could not render (marked on DELIVERIES) is recorded and dead-lettered at the window, never sent", async () => {
    const src = await t.stack.source("unrenderable");
    await t.stack.destination({ id: "unrenderable", sourceIds: [src.id] });
    await publishUnrenderable("unrenderable", src.id, "m-unrenderable");

    const letters = await deadLettersOf("unrenderable");
    const attempts = await attemptsOf("unrenderable", (l) => l.length >= 2, "two attempts");
    for (const a of attempts) {
      expect(a.outcome).toBe(AttemptOutcome.NOT_SENT);
      expect(a.reason).toBe("not sent: the webhook body could not be rendered: unknown call type: teleport");
    }
    expect(letters[0]?.messageId).toBe("m-unrenderable");
    expect(letters[0]?.reason).toMatch(/retry window of 5s exhausted; last: not sent: the webhook body/);

    // A replay does not send the stored call as if it were a body: marked again, dead again.
    const replayed = await t.stack.admin.replayDeadLetters({ destinationId: "unrenderable" });
    expect(replayed.replayed).toBe(1);
    await attemptsOf("unrenderable", (l) => l.length > attempts.length, "attempts after the replay");
    const again = await deadLettersOf("unrenderable");
    expect(again[0]?.sequence).not.toBe(letters[0]?.sequence);
    const all = await attemptsOf("unrenderable", () => true, "attempts");
    expect(all.every((a) => a.outcome === AttemptOutcome.NOT_SENT)).toBe(true);
    expect(
      t.stack.receiver.requests.filter((r) => r.headers["idempotency-key"] === "m-unrenderable"),
    ).toHaveLength(0);
  });

  it("a marked call that waited out the window on a paused destination stays marked in its dead letter: a replay never sends the stored call", async () => {
    // The janitor dead-letters a paused destination's backlog; its letter must keep the mark as
    // the dispatcher's own dead letters do, or a replay sends the stored call as a webhook body.
    const src = await t.stack.source("unrenderable-paused");
    await t.stack.destination({ id: "unrenderable-paused", sourceIds: [src.id], enabled: false });
    await publishUnrenderable("unrenderable-paused", src.id, "m-unrenderable-paused");
    const letters = await deadLettersOf("unrenderable-paused");
    expect(letters[0]?.reason).toBe("destination disabled for the whole retry window");

    await t.stack.admin.updateDestination({
      destination: { id: "unrenderable-paused", enabled: true },
      updateMask: { paths: ["enabled"] },
    });
    const replayed = await t.stack.admin.replayDeadLetters({ destinationId: "unrenderable-paused" });
    expect(replayed.replayed).toBe(1);
    const attempts = await attemptsOf(
      "unrenderable-paused",
      (l) => l.length >= 1,
      "an attempt after the replay",
    );
    expect(attempts[0]?.outcome).toBe(AttemptOutcome.NOT_SENT);
    expect(attempts[0]?.reason).toBe(
      "not sent: the webhook body could not be rendered: unknown call type: teleport",
    );
    expect(
      t.stack.receiver.requests.filter((r) => r.headers["idempotency-key"] === "m-unrenderable-paused"),
    ).toHaveLength(0);
  });
});

describe("an answer that is not HTTP as we know it", () => {
  it("status 999 is recorded as an invalid response and retried, then delivered once the receiver answers 200", async () => {
    const src = await t.stack.source("odd");
    let odd = true;
    const raw = await rawServer(() => (odd ? "999 Odd" : "200 OK"));
    await t.stack.destination({ id: "odd", sourceIds: [src.id], urls: [raw.url] });

    const { messageId } = await src.client.track({ userId: "u-1", event: "Signed Up" });
    // Two requests answered 999 (the answer is chosen as each arrives), seen at the server: the
    // attempt log, which can lag on a loaded machine, must not hold the 200 back until the retry
    // window (5 s) has made the call a dead letter.
    await until(() => raw.requests() >= 2, { message: "two attempts answered 999" });
    odd = false;
    const all = await attemptsOf(
      "odd",
      (l) => l.some((a) => a.outcome === AttemptOutcome.SUCCESS),
      "the delivery once the receiver answers 200",
    );
    const failed = all.slice(0, -1);
    expect(failed.length).toBeGreaterThanOrEqual(2);

    for (const a of failed) {
      expect(a.messageId).toBe(messageId);
      expect(a.outcome).toBe(AttemptOutcome.INVALID_RESPONSE);
      expect(a.status).toBe(999);
      expect(a.retryable).toBe(true);
      expect(a.reason).toMatch(/999 is not a valid HTTP status/);
    }
    expect(all.at(-1)?.outcome).toBe(AttemptOutcome.SUCCESS);
    expect((await t.stack.admin.listDeadLetters({ destinationId: "odd" })).deadLetters).toHaveLength(0);
    expect(raw.requests()).toBe(all.length);
  });
});
