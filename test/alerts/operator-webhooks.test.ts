import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, HookpostError } from "@hookpost/contract";
import { AttemptOutcome } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  ALERTS_BUCKET,
  CONFIG_BUCKET,
  Keyring,
  kvStream,
  newSecretKeyEntry,
  parseSecretKeys,
} from "@hookpost/core";
import type { AlertSettings } from "@hookpost/dispatcher";
import { verifyStandardWebhook } from "@hookpost/receiver";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishCall, track } from "../dispatcher/helpers.js";
import { type ReceivedRequest, Receiver, type Reply } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// Operational webhooks (issue 28) end to end: a real nats-server, ingest and two dispatcher
// replicas in-process, customer endpoints that fail as told, and an operator's receiver that
// verifies every request with @hookpost/receiver (and the reference standardwebhooks package).
// Settings are shortened so that windows and intervals pass in seconds.

const ALERTS: AlertSettings = {
  checkMs: 200,
  healthWindowMs: 2000,
  minAttempts: 3,
  minIntervalMs: 4000,
  // Dead letters are counted in each replica's health summary (one a second), by the summary's
  // time: a burst of them spans the summaries of up to a second and a bit after it. Two windows
  // hold that at 5 s even when a loaded machine stalls for a few seconds; at 2 s a stall of about
  // a second made a third window (one more event than the dead_letter.created test allows).
  deadLetterWindowMs: 5000,
  behindLookups: 500,
};
const keyring = new Keyring(parseSecretKeys(newSecretKeyEntry("alerts-key")));

let stack: Stack;
/** The operator's receiver: every path an operator webhook. */
let ops: Receiver;
/** Secrets of the operator webhooks, by path. */
const secrets = new Map<string, string>();

interface Received {
  webhookId: string;
  path: string;
  type: string;
  timestamp: string;
  data: {
    destination: { id: string; name: string; sourceIds: string[] };
    [k: string]: unknown;
  };
  request: ReceivedRequest;
}

/** Every request the operator received on `path`, each verified (a failed verification fails the test). */
function received(path: string): Received[] {
  return ops.requests
    .filter((r) => r.url === path)
    .map((r) => {
      const secret = secrets.get(path)!;
      const verified = verifyStandardWebhook(r.body, r.headers, secret);
      // The reference implementation agrees.
      new Webhook(secret).verify(r.body.toString("utf8"), r.headers as Record<string, string>);
      const body = JSON.parse(r.body.toString("utf8")) as Omit<Received, "webhookId" | "path" | "request">;
      return { webhookId: verified.id, path, ...body, request: r };
    });
}

const about = (path: string, destinationId: string, type?: string) =>
  received(path).filter((e) => e.data.destination.id === destinationId && (!type || e.type === type));

/** The first event of `type` about the destination, once it arrived (verified). */
const firstEvent = (path: string, destinationId: string, type: string) =>
  until(() => about(path, destinationId, type)[0], {
    timeout: 30_000,
    message: `${type} about ${destinationId} on ${path}`,
  });

/** Each event arrived once: two replicas, one delivery (the operator answers 200). */
function expectOnce(events: Received[]): void {
  const ids = events.map((e) => e.webhookId);
  expect(new Set(ids).size).toBe(ids.length);
}

/** The events about the destination on `path` are of `types`, in that order, each arrived once. */
function expectEvents(path: string, destinationId: string, types: string[]): void {
  const events = about(path, destinationId);
  expect(events.map((e) => e.type)).toEqual(types);
  expectOnce(events);
}

async function operatorWebhook(path: string, extra: Record<string, unknown> = {}) {
  const r = await stack.admin.createOperatorWebhook({
    operatorWebhook: { name: `ops ${path}`, url: ops.url(path), ...extra },
  });
  expect(r.secret).toMatch(/^whsec_/);
  secrets.set(path, r.secret);
  await waitForRevision(r.revision, stack.dispatchers);
  return r.operatorWebhook!;
}

/**
 * A destination of a new source at receiver path `path`, whose requests there get `answer`
 * (undefined: the receiver's usual answer) until `restore()`.
 */
async function destinationAnswering(
  name: string,
  path: string,
  answer: (req: ReceivedRequest) => Reply | undefined,
  extra: Parameters<Stack["destination"]>[0] = {},
) {
  const src = await stack.source();
  const restore = stack.receiver.answerAt(path, answer);
  try {
    const dest = await stack.destination({
      name,
      sourceIds: [src.id],
      urls: [stack.receiver.url(path)],
      ...extra,
    });
    return { src, dest, restore };
  } catch (err) {
    restore();
    throw err;
  }
}

/** Sends calls to the source every `everyMs` until stopped. */
function trickle(sourceId: string, everyMs = 100): { stop(): void } {
  const js = stack.nc.jetstream();
  let stopped = false;
  void (async () => {
    while (!stopped) {
      await publishCall(js, track({ sourceId })).catch(() => {});
      await new Promise((r) => setTimeout(r, everyMs)); // not a wait: the pace of a steady sender
    }
  })();
  return { stop: () => (stopped = true) };
}

beforeAll(async () => {
  stack = await Stack.start({
    dispatchers: 2,
    ingest: { keyring },
    dispatcher: { alerts: ALERTS, keyring },
  });
  ops = await Receiver.http();
  await operatorWebhook("/ops");
});

afterAll(async () => {
  await stack?.close();
  await ops?.close();
});

describe("operator webhooks through the admin API", () => {
  it("are created with a generated secret shown once, read, updated, listed, deleted, and audited without their secret", async () => {
    const created = await stack.admin.createOperatorWebhook({
      operatorWebhook: {
        id: "pager",
        name: "Pager",
        url: "https://pager.example.com/hookpost",
        eventTypes: ["destination.failing", "destination.recovered"],
        failingBelow: 0.8,
        behindAfter: durationFromMs(60_000),
      },
    });
    const secret = created.secret;
    expect(secret).toMatch(/^whsec_/);
    expect(created.operatorWebhook).toMatchObject({
      id: "pager",
      secretSet: true,
      secret: "",
      enabled: true,
      failingBelow: 0.8,
      eventTypes: ["destination.failing", "destination.recovered"],
    });
    const got = (await stack.admin.getOperatorWebhook({ id: "pager" })).operatorWebhook!;
    expect(got.secret).toBe("");
    expect(Number(got.behindAfter!.seconds)).toBe(60);

    const updated = await stack.admin.updateOperatorWebhook({
      operatorWebhook: { id: "pager", url: "https://pager.example.com/v2", failingBelow: undefined },
      updateMask: { paths: ["url", "failing_below"] },
    });
    expect(updated.operatorWebhook).toMatchObject({ url: "https://pager.example.com/v2", name: "Pager" });
    expect(updated.operatorWebhook!.failingBelow).toBeUndefined();
    const ids = (await stack.admin.listOperatorWebhooks({})).operatorWebhooks.map((w) => w.id);
    expect(ids).toContain("pager");

    // Stored sealed with SECRETS_KEYS: the bucket never holds the secret in clear.
    const jsm = await stack.nc.jetstreamManager();
    const stored = await jsm.streams.getMessage(kvStream(CONFIG_BUCKET), {
      last_by_subj: `$KV.${CONFIG_BUCKET}.operator_webhook.pager`,
    });
    const raw = new TextDecoder().decode(stored.data);
    expect(raw).toContain('"sealed"');
    expect(raw).not.toContain(secret);
    expect(raw).not.toContain(secret.slice("whsec_".length));

    await stack.admin.deleteOperatorWebhook({ id: "pager" });
    const gone = await stack.admin.getOperatorWebhook({ id: "pager" }).catch((e: unknown) => e);
    expect((gone as HookpostError).code).toBe(Code.NOT_FOUND);

    // Every write is in the audit log, about the operator webhook, and the secret in none of it.
    const records = (await stack.admin.listAuditRecords({ resourceId: "pager" })).records;
    expect(records.map((r) => r.action)).toEqual([
      "DeleteOperatorWebhook",
      "UpdateOperatorWebhook",
      "CreateOperatorWebhook",
    ]);
    for (const r of records) {
      expect(r.resourceType).toBe("operator_webhook");
      expect(JSON.stringify(r, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(
        secret.slice("whsec_".length),
      );
    }
    expect(records[1]!.changes[0]!.changedFields).toEqual(["failingBelow", "url"]);
  });

  it("refuses what it cannot honour, naming the field", async () => {
    const bad = await stack.admin
      .createOperatorWebhook({
        operatorWebhook: {
          name: "x",
          url: "ftp://x.example.com",
          eventTypes: ["destination.exploded"],
          failingBelow: 2,
          behindAfter: durationFromMs(10),
          secret: "not-a-whsec",
        },
      })
      .then(
        () => undefined,
        (e: unknown) => e as HookpostError,
      );
    expect(bad).toBeInstanceOf(HookpostError);
    if (!bad) return;
    expect(bad.code).toBe(Code.INVALID_ARGUMENT);
    const fields = bad.fieldViolations.map((v) => v.field).sort();
    expect(fields).toEqual([
      "operator_webhook.behind_after",
      "operator_webhook.event_types[0]",
      "operator_webhook.failing_below",
      "operator_webhook.secret",
      "operator_webhook.url",
    ]);
    // A customer destination cannot take an operator webhook's delivery id.
    const reserved = await stack.admin
      .createDestination({ destination: { id: "_ops_x", name: "x", urls: ["https://x.example.com"] } })
      .then(
        () => undefined,
        (e: unknown) => e as HookpostError,
      );
    if (!reserved) throw new Error("created");
    expect(reserved.code).toBe(Code.INVALID_ARGUMENT);
    expect(reserved.message).toContain("reserved for operator webhooks");
  });
});

describe("operational events", () => {
  it("destination.failing, then destination.recovered: signed, verified, each once across two replicas", async () => {
    let failing = true;
    const { src, dest, restore } = await destinationAnswering("Flaky", "/flaky", () =>
      failing ? { status: 500 } : undefined,
    );
    const calls = trickle(src.id);
    try {
      const failingEvent = await firstEvent("/ops", dest.id, "destination.failing");
      expect(failingEvent!.data).toMatchObject({
        destination: { id: dest.id, name: "Flaky", sourceIds: [src.id] },
        threshold: 0.5,
        windowSeconds: 2,
        lastFailure: { reason: "500 is retried" },
      });
      expect(failingEvent!.data.successRate as number).toBeLessThan(0.5);
      expect(failingEvent!.data.attempts as number).toBeGreaterThanOrEqual(3);
      // The headers the body is signed with; the id is also the Idempotency-Key.
      expect(failingEvent!.request.headers["idempotency-key"]).toBe(failingEvent!.webhookId);
      expect(failingEvent!.webhookId).toMatch(/^evt_[0-9a-f]{24}$/);

      failing = false;
      const recovered = await firstEvent("/ops", dest.id, "destination.recovered");
      expect(recovered!.data).toMatchObject({ condition: "failing", threshold: 0.5 });
      expect(recovered!.data.successRate as number).toBeGreaterThanOrEqual(0.75);
      expect(Date.parse(recovered!.timestamp) - Date.parse(failingEvent!.timestamp)).toBeGreaterThanOrEqual(
        ALERTS.minIntervalMs,
      );
    } finally {
      calls.stop();
      restore();
    }
    expectEvents("/ops", dest.id, ["destination.failing", "destination.recovered"]);
  });

  it("a flapping destination is debounced: events alternate and are never closer than ALERT_MIN_INTERVAL", async () => {
    // Refusing (400: not retried, so the breaker stays closed and attempts keep coming) and
    // accepting in turns of 2.5 s: longer than the 2 s window, so each turn crosses a threshold.
    const started = Date.now();
    const bad = () => Math.floor((Date.now() - started) / 2500) % 2 === 0;
    const { src, dest, restore } = await destinationAnswering("Flapping", "/flapping", () =>
      bad() ? { status: 400 } : undefined,
    );
    const calls = trickle(src.id, 50);
    try {
      // Six turns (15 s): undebounced, about six events 2.5 s apart.
      await until(
        () => Date.now() - started > 15_000 && about("/ops", dest.id, "destination.recovered").length > 0,
        {
          timeout: 40_000,
          message: "15 s of flapping, and a recovery",
        },
      );
    } finally {
      calls.stop();
      restore();
    }
    const events = about("/ops", dest.id).filter((e) => e.type !== "dead_letter.created");
    expectOnce(events);
    expect(events.length).toBeGreaterThanOrEqual(2);
    events.forEach((e, i) => {
      expect(e.type).toBe(i % 2 === 0 ? "destination.failing" : "destination.recovered");
      if (i > 0) {
        const gap = Date.parse(e.timestamp) - Date.parse(events[i - 1]!.timestamp);
        expect(gap).toBeGreaterThanOrEqual(ALERTS.minIntervalMs);
      }
    });
  });

  it("destination.disabled with the reason when Hookpost pauses a destination, once", async () => {
    const { src, dest, restore } = await destinationAnswering("Gone", "/gone", () => ({ status: 410 }));
    try {
      for (let i = 0; i < 3; i++) await publishCall(stack.nc.jetstream(), track({ sourceId: src.id }));
      const event = await firstEvent("/ops", dest.id, "destination.disabled");
      const stored = (await stack.admin.getDestination({ id: dest.id })).destination!;
      expect(event!.data).toMatchObject({
        destination: { id: dest.id, name: "Gone" },
        reason: stored.disabledReason,
      });
      expect(String(event!.data.reason)).toMatch(/410 Gone/);
      expect(Date.parse(String(event!.data.disabledAt))).toBe(
        Number(stored.disabledTime!.seconds) * 1000 + Math.floor(stored.disabledTime!.nanos / 1e6),
      );
      // An operator's own pause is not announced; enabling and pausing again by hand says nothing.
      const r = await stack.admin.updateDestination({
        destination: { id: dest.id, enabled: false },
        updateMask: { paths: ["enabled"] },
      });
      await waitForRevision(r.revision, stack.dispatchers);
      const alerts = await stack.nc.jetstream().views.kv(ALERTS_BUCKET);
      await until(async () => (await alerts.get(`d.${dest.id}`))?.operation !== "PUT", {
        message: "the announced pause forgotten once an operator took over",
      });
      expect(about("/ops", dest.id, "destination.disabled")).toHaveLength(1);
    } finally {
      restore();
    }
  });

  it("destination.behind when the oldest pending call is older than behind_after, then recovered", async () => {
    const w = await operatorWebhook("/lag", {
      behindAfter: durationFromMs(2000),
      eventTypes: ["destination.behind", "destination.recovered"],
    });
    const { src, dest, restore } = await destinationAnswering(
      "Slow",
      "/slow",
      () => ({ status: 200, delayMs: 600 }),
      { maxInFlight: 1 },
    );
    try {
      const js = stack.nc.jetstream();
      const sent = Array.from({ length: 10 }, () => track({ sourceId: src.id }));
      for (const c of sent) await publishCall(js, c);
      const behind = await firstEvent("/lag", dest.id, "destination.behind");
      expect(behind!.data.behindAfterSeconds).toBe(2);
      expect(behind!.data.oldestPendingSeconds as number).toBeGreaterThanOrEqual(2);
      expect(Date.parse(String(behind!.data.oldestPendingTime))).toBeLessThan(
        Date.parse(behind!.timestamp) - 1999,
      );
      await until(() => sent.every((c) => stack.receiver.messageIds().has(c.messageId)), {
        timeout: 30_000,
        message: "every slow call delivered",
      });
      const recovered = await firstEvent("/lag", dest.id, "destination.recovered");
      expect(recovered!.data).toMatchObject({ condition: "behind", behindAfterSeconds: 2 });
      expectEvents("/lag", dest.id, ["destination.behind", "destination.recovered"]);
      // The default threshold (15 min) of the other webhook was never reached.
      expect(about("/ops", dest.id, "destination.behind")).toHaveLength(0);
    } finally {
      restore();
      await stack.admin.deleteOperatorWebhook({ id: w.id });
    }
  });

  it("dead_letter.created counts the dead letters of a window in one event per destination", async () => {
    // 400 is not retried: each call is a dead letter at its first attempt.
    const { src, dest, restore } = await destinationAnswering("Refusing", "/refusing", () => ({
      status: 400,
      body: "no",
    }));
    try {
      const js = stack.nc.jetstream();
      for (let i = 0; i < 12; i++) await publishCall(js, track({ sourceId: src.id }));
      const count = () =>
        about("/ops", dest.id, "dead_letter.created").reduce((n, e) => n + (e.data.count as number), 0);
      await until(() => count() === 12, { timeout: 30_000, message: "12 dead letters announced" });
      const events = about("/ops", dest.id, "dead_letter.created");
      // Aggregated: a window holds many (12 calls sent at once span at most two windows).
      expect(events.length).toBeLessThanOrEqual(2);
      expectOnce(events);
      expect(events[0]!.data).toMatchObject({ lastReason: "400 is not retried" });
      const e = events[0]!.data;
      expect(Date.parse(String(e.windowEnd)) - Date.parse(String(e.windowStart))).toBe(
        ALERTS.deadLetterWindowMs,
      );
      const dead = await stack.admin.listDeadLetters({ destinationId: dest.id });
      expect(dead.deadLetters).toHaveLength(12);
    } finally {
      restore();
    }
  });

  it("a failing operator endpoint is retried like a customer webhook: same webhook-id, attempts recorded", async () => {
    let answered = 0;
    const restoreOps = ops.answerAt("/unsteady", () => (answered++ < 2 ? { status: 503 } : undefined));
    const w = await operatorWebhook("/unsteady", { eventTypes: ["dead_letter.created"] });
    const { src, dest, restore } = await destinationAnswering("Refusing again", "/refusing-again", () => ({
      status: 400,
    }));
    try {
      await publishCall(stack.nc.jetstream(), track({ sourceId: src.id }));
      await until(() => ops.requests.filter((r) => r.url === "/unsteady").length >= 3, {
        timeout: 30_000,
        message: "the event delivered after two 503s",
      });
      const events = received("/unsteady");
      expect(events.map((e) => e.type)).toEqual(Array(3).fill("dead_letter.created"));
      expect(new Set(events.map((e) => e.webhookId)).size).toBe(1);
      expect(events[0]!.data.destination.id).toBe(dest.id);
      const attempts = await until(
        async () => {
          const list = (await stack.admin.listAttempts({ destinationId: `_ops_${w.id}` })).attempts;
          return list.length === 3 && list;
        },
        { message: "three attempts recorded for the operator webhook" },
      );
      expect(attempts.map((a) => a.outcome).reverse()).toEqual([
        AttemptOutcome.SERVER_ERROR,
        AttemptOutcome.SERVER_ERROR,
        AttemptOutcome.SUCCESS,
      ]);
    } finally {
      restoreOps();
      restore();
      await stack.admin.deleteOperatorWebhook({ id: w.id });
    }
  });

  it("one replica watches; when it stops, the other takes over without announcing anything again", async () => {
    const watching = () => stack.dispatchers.filter((d) => d.watchingAlerts());
    await until(() => watching().length === 1, { message: "exactly one replica watching" });
    const before = received("/ops").length;
    const watcher = watching()[0]!;
    await watcher.close();
    stack.dispatchers.splice(stack.dispatchers.indexOf(watcher), 1);
    await stack.addDispatcher();
    await until(() => watching().length === 1, { timeout: 20_000, message: "another replica watching" });

    // New dead letters are announced by the new watcher...
    const { src, dest, restore } = await destinationAnswering("After takeover", "/after-takeover", () => ({
      status: 400,
    }));
    try {
      for (let i = 0; i < 3; i++) await publishCall(stack.nc.jetstream(), track({ sourceId: src.id }));
      await until(
        () =>
          about("/ops", dest.id, "dead_letter.created").reduce((n, e) => n + (e.data.count as number), 0) ===
          3,
        {
          timeout: 30_000,
          message: "dead letters after the takeover announced",
        },
      );
    } finally {
      restore();
    }
    // ...and nothing announced before is announced again: per destination and condition the
    // events still alternate, a pause is announced once, and dead letters are counted once.
    console.log(
      received("/ops")
        .slice(before)
        .map((e) => `${e.type} ${e.data.destination.name}`),
    );
    const all = received("/ops");
    expectOnce(all);
    for (const id of new Set(all.map((e) => e.data.destination.id))) {
      for (const condition of ["failing", "behind"]) {
        const seq = all
          .filter((e) => e.data.destination.id === id)
          .filter(
            (e) =>
              e.type === `destination.${condition}` ||
              (e.type === "destination.recovered" && e.data.condition === condition),
          )
          .map((e) => e.type);
        const alternating = seq.map((_t, i) =>
          i % 2 === 0 ? `destination.${condition}` : "destination.recovered",
        );
        expect(seq).toEqual(alternating);
      }
      expect(
        all.filter((e) => e.data.destination.id === id && e.type === "destination.disabled").length,
      ).toBeLessThanOrEqual(1);
    }
    const refused = all.filter(
      (e) => e.data.destination.name === "Refusing" && e.type === "dead_letter.created",
    );
    expect(refused.reduce((n, e) => n + (e.data.count as number), 0)).toBe(12);
  });
});
