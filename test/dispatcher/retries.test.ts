import { rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type { DeadLetter } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  destinationSubjects,
  laneSubject,
  legacyDeliverySubject,
  legacyDestinationConsumer,
  partitionSubject,
} from "@hookpost/core";
import type { RunningDispatcher } from "@hookpost/dispatcher";
import { renderBody } from "@hookpost/dispatcher";
import { AckPolicy } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterValue } from "../e2e/helpers.js";
import { until } from "../helpers/until.js";
import {
  destination,
  makeCerts,
  type Pipeline,
  pipeline,
  publishCall,
  Receiver,
  type TestCerts,
  track,
  useReceivers,
} from "./helpers.js";

/**
 * Failure handling end to end: failover, retries by JetStream redelivery, timeouts, statuses
 * that are not retried, TLS, SSRF, and the retry window ending in a dead letter that replays.
 * Short settings: 1.5 s timeout, 200 ms base delay, 1 s max delay, 3 s retry window.
 */

/**
 * WEBHOOK_TIMEOUT here. Not shorter: the receivers answer in the test's own process, and a loaded
 * machine stalling it for longer than the timeout while an answer is on its way makes that answer
 * a timeout and adds an attempt that the counts below do not expect (it was 300 ms).
 */
const TIMEOUT_MS = 1500;

let p: Pipeline;
let certs: TestCerts;
const { receiver, keep } = useReceivers();
let n = 0;

/** A destination on its own source; returns the source id to publish to. */
async function dest(urls: string[], extra: Partial<Parameters<typeof destination>[0]> = {}) {
  const id = `d${++n}`;
  const sourceId = `s${n}`;
  await p.putDestination(destination({ id, sourceIds: [sourceId], urls, ...extra }));
  return { id, sourceId };
}

async function deadLetters(destinationId: string, count = 1, timeoutMs = 8000): Promise<DeadLetter[]> {
  let letters: DeadLetter[] = [];
  await until(
    async () => {
      letters = await p.deadLetters.list(destinationId);
      return letters.length >= count;
    },
    { timeout: timeoutMs, message: `dead letters of ${destinationId}` },
  );
  return letters;
}

let dispatcher: RunningDispatcher;

beforeAll(async () => {
  certs = makeCerts();
  p = await pipeline();
  dispatcher = await p.dispatcher({
    webhookTimeoutMs: TIMEOUT_MS,
    retryBaseDelayMs: 200,
    caFile: certs.caCert,
    topology: { retryWindowMs: 3000, retryMaxDelayMs: 1000 } as never,
    // These tests count every retry of a failing endpoint: no breaker holds them back
    // (test/dispatcher/breaker.test.ts tests the breaker).
    breakerFailures: 1000,
  });
});

afterAll(async () => {
  await p?.close();
  rmSync(certs.dir, { recursive: true, force: true });
});

describe("retries", () => {
  it("fails over: 500 on the first URL, 200 on the second, delivered once and never retried", async () => {
    const first = await receiver();
    const second = await receiver();
    const third = await receiver();
    first.respond = () => ({ status: 500 });
    const d = await dest([first.url(), second.url(), third.url()]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    await second.waitFor(1);
    await sleep(1500); // not a wait: no retry follows (the assertion)
    expect([first.requests.length, second.requests.length, third.requests.length]).toEqual([1, 1, 0]);
  });

  it("retries 503 twice, then delivers on the 200, with the same Idempotency-Key and backoff between", async () => {
    const r = await receiver();
    r.respond = (req) => ({ status: req.n <= 2 ? 503 : 200 });
    const d = await dest([r.url()]);
    const call = track({ sourceId: d.sourceId });
    await publishCall(p.js, call);
    await r.waitFor(3);
    await sleep(1000); // not a wait: no fourth attempt follows (the assertion)
    expect(r.requests).toHaveLength(3);
    expect(r.messageIds()).toEqual(new Set([call.messageId]));
    expect(new Set(r.requests.map((x) => x.body.toString()))).toEqual(new Set([renderBody(call)]));
    // Equal jitter over 200 ms, then over min(400 ms, time spent + 200 ms): >= 100 ms, then >= 150 ms.
    expect(r.requests[1]!.at - r.requests[0]!.at).toBeGreaterThanOrEqual(90);
    expect(r.requests[2]!.at - r.requests[1]!.at).toBeGreaterThanOrEqual(140);
  });

  it("honours Retry-After on 429", async () => {
    const r = await receiver();
    r.respond = (req) => (req.n === 1 ? { status: 429, headers: { "retry-after": "1" } } : { status: 200 });
    const d = await dest([r.url()]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    await r.waitFor(2);
    // Capped at RETRY_MAX_DELAY (1 s here), and at least the 1 s asked for.
    expect(r.requests[1]!.at - r.requests[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it("retries a timeout, then delivers", async () => {
    const r = await receiver();
    r.respond = (req) => (req.n === 1 ? { hang: true } : { status: 200 });
    const d = await dest([r.url()]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    await r.waitFor(2);
    await sleep(800); // not a wait: no third attempt follows (the assertion)
    expect(r.requests).toHaveLength(2);
    expect(r.requests[1]!.at - r.requests[0]!.at).toBeGreaterThanOrEqual(TIMEOUT_MS + 90);
    expect(await p.deadLetters.list(d.id)).toEqual([]);
  });

  it("never re-sends to a destination that succeeded because another destination fails", async () => {
    const good = await receiver();
    const bad = await receiver();
    bad.respond = () => ({ status: 500 });
    await p.putDestination(destination({ id: "good", sourceIds: ["shared"], urls: [good.url()] }));
    await p.putDestination(destination({ id: "bad", sourceIds: ["shared"], urls: [bad.url()] }));
    await publishCall(p.js, track({ sourceId: "shared" }));
    await bad.waitFor(3, 5000);
    expect(good.requests).toHaveLength(1);
  });
});

describe("failures and dead letters", () => {
  it("keeps retrying while any URL failed retryably; the dead letter holds the exact body and the last outcome per URL", async () => {
    const a = await receiver();
    const b = await receiver();
    a.respond = () => ({ status: 503 });
    b.respond = () => ({ status: 400, body: "bad payload" });
    const d = await dest([a.url("/a"), `${b.url("/b")}?token=abc`]);
    const call = track({ sourceId: d.sourceId, properties: { n: 1 } });
    await publishCall(p.js, call);
    const [letter] = await deadLetters(d.id);
    // b's 400 is final, but a's 503 is not: retried until the window ends.
    expect(letter).toMatchObject({
      messageId: call.messageId,
      destinationId: d.id,
      sourceId: d.sourceId,
      body: renderBody(call),
      outcomes: [
        { url: a.url("/a"), status: 503, error: "http", detail: "503 is retried" },
        { url: `${b.url("/b")}?token=abc`, status: 400, error: "http", detail: "400 is not retried" },
      ],
    });
    expect(letter!.attempts).toBeGreaterThan(1);
    expect(letter!.reason).toBe("retry window of 3s exhausted; last: 503 is retried; 400 is not retried");
    // Written when the last retry that fits the window fails, well before the stream's max-age
    // backstop (2 x window + max delay = 7 s); the slack is that attempt's own duration.
    expect(Date.parse(letter!.deadTime) - Date.parse(letter!.firstAttemptTime)).toBeLessThan(4000);
  });

  it("dead-letters a plain 400 at once", async () => {
    const r = await receiver();
    r.respond = () => ({ status: 400 });
    const d = await dest([r.url()]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    const [letter] = await deadLetters(d.id);
    await sleep(700); // not a wait: no second attempt follows (the assertion)
    expect(r.requests).toHaveLength(1);
    expect(letter).toMatchObject({ attempts: 1, reason: "400 is not retried" });
    expect(letter!.outcomes).toEqual([
      { url: r.url(), status: 400, error: "http", detail: "400 is not retried" },
    ]);
  });

  it("does not follow redirects", async () => {
    const r = await receiver();
    const target = await receiver();
    r.respond = () => ({ status: 302, headers: { location: target.url("/moved") } });
    const d = await dest([r.url()]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    const [letter] = await deadLetters(d.id);
    expect(letter!.outcomes[0]).toMatchObject({ status: 302, error: "redirect" });
    expect(r.requests).toHaveLength(1);
    expect(target.requests).toHaveLength(0);
  });

  it("sends nothing to a self-signed HTTPS endpoint", async () => {
    const self = await Receiver.https(certs.selfSignedCert, certs.selfSignedKey);
    keep(self);
    const d = await dest([self.url()]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    const [letter] = await deadLetters(d.id);
    // A certificate error is final: dead at once, not after the window. (On a loaded machine the
    // handshake may first overrun the timeout, which is retried, so attempts is not pinned.)
    expect(letter!.reason).toMatch(/^TLS certificate refused, no request sent: .*SELF_SIGNED/);
    expect(letter!.outcomes).toEqual([expect.objectContaining({ status: 0, error: "tls" })]);
    expect(letter!.outcomes[0]!.detail).toMatch(/SELF_SIGNED/);
    const connections = self.connections;
    expect(connections).toBeGreaterThanOrEqual(1);
    await sleep(700); // not a wait: no further connection follows (the assertion)
    expect(self.connections).toBe(connections);
    expect(self.requests).toHaveLength(0);
  });

  it("delivers to an HTTPS endpoint whose CA is trusted through WEBHOOK_CA_FILE", async () => {
    const https = await Receiver.https(certs.serverCert, certs.serverKey);
    keep(https);
    const d = await dest([https.url("/tls", "localhost")]);
    const call = track({ sourceId: d.sourceId });
    await publishCall(p.js, call);
    const [req] = await https.waitFor(1).catch(async (err: Error) => {
      // Say why, if the dispatcher gave up (a flake here once showed no request at all).
      throw new Error(`${err.message}; dead letters: ${JSON.stringify(await p.deadLetters.list(d.id))}`);
    });
    expect(req!.body.toString()).toBe(renderBody(call));
  });

  it("refuses a cloud-metadata target (SSRF) without retrying", async () => {
    const d = await dest(["http://169.254.169.254/latest/meta-data/"]);
    await publishCall(p.js, track({ sourceId: d.sourceId }));
    const [letter] = await deadLetters(d.id);
    expect(letter!.outcomes[0]).toMatchObject({ status: 0, error: "ssrf" });
    expect(letter!.attempts).toBe(1);
  });
});

describe("retry window and dead letters", () => {
  it("dead-letters when the window runs out; the record lists, pages, and replays once the endpoint recovers", async () => {
    const r = await receiver();
    r.respond = () => ({ status: 500 });
    const d = await dest([r.url()]);
    const calls = [
      track({ sourceId: d.sourceId }),
      track({ sourceId: d.sourceId }),
      track({ sourceId: d.sourceId }),
    ];
    const started = Date.now();
    for (const c of calls) await publishCall(p.js, c);
    const letters = await deadLetters(d.id, 3);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThan(1500);
    expect(elapsed).toBeLessThan(6000);
    expect(letters.map((l) => l.messageId).sort()).toEqual(calls.map((c) => c.messageId).sort());
    for (const l of letters) {
      expect(l.reason).toBe("retry window of 3s exhausted; last: 500 is retried");
      expect(l.attempts).toBeGreaterThanOrEqual(3);
      expect(l.outcomes).toEqual([{ url: r.url(), status: 500, error: "http", detail: "500 is retried" }]);
    }
    const attemptsBefore = r.requests.length;
    expect(attemptsBefore).toBe(letters.reduce((sum, l) => sum + l.attempts, 0));

    // Paging by sequence.
    const page1 = await p.deadLetters.list(d.id, { pageSize: 2 });
    const page2 = await p.deadLetters.list(d.id, { pageSize: 2, afterSequence: page1[1]!.sequence });
    expect([...page1, ...page2].map((l) => l.sequence)).toEqual(letters.map((l) => l.sequence));
    expect(await p.deadLetters.list("no-such-destination")).toEqual([]);

    // Nothing more is attempted once dead.
    await sleep(800); // not a wait: nothing is attempted once dead (the assertion)
    expect(r.requests.length).toBe(attemptsBefore);

    // Replay one by sequence, then the rest.
    r.respond = () => ({ status: 200 });
    expect(await p.deadLetters.replay(d.id, [letters[0]!.sequence, 999_999])).toEqual({ replayed: 1 });
    await r.waitFor(attemptsBefore + 1);
    expect(await p.deadLetters.replay(d.id)).toEqual({ replayed: 2 });
    await r.waitFor(attemptsBefore + 3);
    await sleep(500); // not a wait: no extra replay follows (the assertion)
    const replayed = r.requests.slice(attemptsBefore);
    expect(replayed).toHaveLength(3);
    expect(new Set(replayed.map((x) => String(x.headers["idempotency-key"])))).toEqual(
      new Set(calls.map((c) => c.messageId)),
    );
    for (const x of replayed) {
      const call = calls.find((c) => c.messageId === x.headers["idempotency-key"])!;
      expect(x.body.toString()).toBe(renderBody(call));
    }
    expect(await p.deadLetters.list(d.id)).toEqual([]);
    // Replaying again finds nothing.
    expect(await p.deadLetters.replay(d.id)).toEqual({ replayed: 0 });
  });
});

describe("janitor", () => {
  it("keeps a disabled destination's backlog, and dead-letters it when the retry window ends", async () => {
    const r = await receiver();
    r.respond = () => ({ status: 500 });
    const d = await dest([r.url()]);
    const call = track({ sourceId: d.sourceId });
    await publishCall(p.js, call);
    await r.waitFor(1);
    const rec = p.store.destination(d.id)!;
    await p.putDestination({ ...rec, enabled: false });
    // In-flight attempts end: every request the endpoint got has an outcome.
    await until(
      async () =>
        (await counterValue(dispatcher.metrics.registry, "hookpost_dispatcher_deliveries_total", {
          destination: d.id,
        })) >= r.requests.length,
      { message: "an outcome for every attempt made before the pause" },
    );
    const seen = r.requests.length;
    const [letter] = await deadLetters(d.id, 1, 8000);
    expect(letter).toMatchObject({
      messageId: call.messageId,
      body: renderBody(call),
      reason: "destination disabled for the whole retry window",
    });
    // Paused: nothing was attempted after the destination was disabled.
    expect(r.requests.length).toBe(seen);
    // Dead-lettered, so no longer stored anywhere on DELIVERIES.
    for (const filter of destinationSubjects(d.id)) {
      const info = await p.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
      expect(info.state.subjects ?? {}).toEqual({});
    }
  });

  it("removes the consumers and deliveries of a destination that no longer exists, in the old layout too", async () => {
    // The per-destination layout before issue 24: moved to lanes, then removed as orphans.
    await p.jsm.consumers.add(DELIVERIES_STREAM, {
      durable_name: legacyDestinationConsumer("ghost"),
      filter_subject: legacyDeliverySubject("ghost"),
      ack_policy: AckPolicy.Explicit,
    });
    await p.js.publish(legacyDeliverySubject("ghost"), "{}");
    await p.js.publish(legacyDeliverySubject("ghost2"), "{}");
    await p.js.publish(partitionSubject(3, "ghost3"), "{}");
    await p.js.publish(laneSubject("ghost4"), "{}");
    await until(
      async () => {
        const subjects: string[] = [];
        for (const filter of ["hookpost.deliveries.>", "hookpost.lanes.>"]) {
          const info = await p.jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: filter });
          subjects.push(...Object.keys(info.state.subjects ?? {}));
        }
        // A consumer being deleted at that moment is listed as null by the server.
        const consumers = (await p.jsm.consumers.list(DELIVERIES_STREAM).next()).map((c) => c?.name ?? "");
        return !subjects.some((s) => s.includes("ghost")) && !consumers.some((c) => c.includes("ghost"));
      },
      { timeout: 8000, message: "ghost cleanup" },
    );
  });
});
