import type { JsonObject } from "@bufbuild/protobuf";
import { adminMetadata, createClient } from "@hookpost/client";
import { type CallType, consentDecision } from "@hookpost/contract";
import {
  ConsentMissing,
  DeliveryState,
  type GetMessageResponse,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { EVENTS_STREAM, ROUTER_CONSUMER } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hookpost } from "../cli/run-cli.js";
import { counterValue, STACK_OPTIONS } from "../e2e/helpers.js";
import { code } from "../helpers/grpc-code.js";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/**
 * Consent per destination (issue 26) end to end: real ingest, NATS, dispatcher and one receiver
 * per destination. Source `web` has three destinations:
 *   open       no consent categories
 *   analytics  ["Analytics"]                 (a call without consent object: delivered, the default)
 *   both       ["Analytics", "Advertising"]  (a call without consent object: filtered)
 * Every call type is sent with each consent case; each receiver must get exactly the calls the
 * contract's rule grants it, and GetMessage must say "filtered" with the reason for the others.
 */

let stack: Stack;
let src: { id: string; client: IngestClient };
const rx: Record<string, Receiver> = {};
const DESTINATIONS = {
  open: { consentCategories: [] as string[] },
  analytics: { consentCategories: ["Analytics"] },
  both: { consentCategories: ["Analytics", "Advertising"], consentMissing: "FILTER" as const },
};
type DestName = keyof typeof DESTINATIONS;
const NAMES = Object.keys(DESTINATIONS) as DestName[];
/** Destination id of each name (ids are per test run). */
const ids = {} as Record<DestName, string>;

const preferences = (p: Record<string, boolean>): JsonObject => ({
  ip: "203.0.113.9",
  consent: { categoryPreferences: p },
});
/** The consent cases: the call's context (undefined: no context at all). */
const CASES: Record<string, JsonObject | undefined> = {
  granted: preferences({ Analytics: true, Advertising: true }),
  analyticsOnly: preferences({ Analytics: true, Advertising: false }),
  noConsent: undefined,
  // Beyond the three cases: the Analytics destination filters too.
  advertisingOnly: preferences({ Advertising: true }),
};

/** Sends one call of each type with `context`; returns its message id. */
const SEND: Record<
  CallType,
  (c: IngestClient, context: JsonObject | undefined) => Promise<{ messageId: string }>
> = {
  identify: (c, context) => c.identify({ userId: "u-consent", traits: { plan: "pro" }, ...ctx(context) }),
  track: (c, context) => c.track({ userId: "u-consent", event: "Signed Up", ...ctx(context) }),
  page: (c, context) => c.page({ userId: "u-consent", name: "Pricing", ...ctx(context) }),
  screen: (c, context) => c.screen({ userId: "u-consent", name: "Home", ...ctx(context) }),
  group: (c, context) => c.group({ userId: "u-consent", groupId: "g-1", ...ctx(context) }),
  alias: (c, context) => c.alias({ userId: "u-consent", previousId: "anon-consent", ...ctx(context) }),
};
const ctx = (context: JsonObject | undefined) => (context === undefined ? {} : { context });

beforeAll(async () => {
  stack = await Stack.start(STACK_OPTIONS);
  src = await stack.source("web");
  for (const name of NAMES) {
    rx[name] = await Receiver.http();
    const d = DESTINATIONS[name];
    const created = await stack.destination({
      name,
      sourceIds: [src.id],
      urls: [rx[name].url(`/${name}`)],
      consentCategories: d.consentCategories,
      ...("consentMissing" in d ? { consentMissing: ConsentMissing.FILTER } : {}),
    });
    ids[name] = created.id;
  }
});

afterAll(async () => {
  await stack?.close();
  await Promise.all(Object.values(rx).map((r) => r.close()));
});

/** The message's timeline once every destination has its final state (delivered or filtered). */
async function settled(messageId: string): Promise<GetMessageResponse> {
  return until(
    async () => {
      if ((await code(stack.admin.getMessage({ messageId }))) !== "OK") return undefined;
      const m = await stack.admin.getMessage({ messageId });
      const done = m.deliveries.every(
        (d) => d.state === DeliveryState.DELIVERED || d.state === DeliveryState.FILTERED,
      );
      return m.deliveries.length === NAMES.length && done && m;
    },
    { timeout: 20_000, message: `the timeline of ${messageId} settled` },
  );
}

describe("consent per destination", () => {
  it("every call type reaches exactly the destinations whose consent it grants; the timeline says why the others were filtered", async () => {
    const sent: { type: CallType; caseName: string; messageId: string; context: JsonObject | undefined }[] =
      [];
    for (const type of Object.keys(SEND) as CallType[]) {
      for (const [caseName, context] of Object.entries(CASES)) {
        const { messageId } = await SEND[type](src.client, context);
        sent.push({ type, caseName, messageId, context });
      }
    }
    // What the rule expects, and the reasons spelled out for the three cases of the brief.
    const expected = (s: (typeof sent)[number], name: DestName) =>
      consentDecision({ type: s.type, context: s.context }, DESTINATIONS[name]);
    const REASONS: Record<string, Partial<Record<DestName, string>>> = {
      granted: {},
      analyticsOnly: { both: 'consent: "Advertising" not granted' },
      noConsent: { both: "consent: no consent object" },
      advertisingOnly: {
        analytics: 'consent: "Analytics" not granted',
        both: 'consent: "Analytics" not granted',
      },
    };

    // Wait on facts: every expected delivery arrived, and every timeline is final.
    for (const name of NAMES) {
      const want = sent.filter((s) => expected(s, name).deliver).map((s) => s.messageId);
      await until(() => want.every((id) => rx[name]!.messageIds().has(id)), {
        timeout: 20_000,
        message: `${want.length} calls at ${name}`,
      });
    }
    for (const s of sent) {
      const m = await settled(s.messageId);
      for (const name of NAMES) {
        const d = m.deliveries.find((x) => x.destinationId === ids[name]);
        const reason = REASONS[s.caseName]![name];
        const what = `${s.type}/${s.caseName} at ${name}`;
        expect(expected(s, name).reason, what).toBe(reason);
        if (reason === undefined) {
          expect(d, what).toMatchObject({ state: DeliveryState.DELIVERED, filterReason: "" });
        } else {
          // Filtered, not failed: no attempt, the reason of the rule.
          expect(d, what).toMatchObject({ state: DeliveryState.FILTERED, attempts: 0, filterReason: reason });
          expect(
            m.attempts.filter((a) => a.destinationId === ids[name]),
            what,
          ).toEqual([]);
        }
      }
      expect(m.noDestination).toBe(false);
    }
    // The routing of every call is recorded (above), so no filtered call can still arrive: each
    // receiver got exactly the calls the rule grants it, the body with its consent object.
    for (const name of NAMES) {
      const want = new Set(sent.filter((s) => expected(s, name).deliver).map((s) => s.messageId));
      expect(rx[name]!.messageIds(), name).toEqual(want);
    }
    expect(rx.open!.messageIds().size).toBe(24);
    expect(rx.analytics!.messageIds().size).toBe(18);
    expect(rx.both!.messageIds().size).toBe(6);
    const granted = sent.find((s) => s.type === "track" && s.caseName === "granted")!;
    const body = rx.both!.requests.find((r) => r.headers["idempotency-key"] === granted.messageId)!.body;
    expect(JSON.parse(body.toString()).context.consent).toEqual({
      categoryPreferences: { Analytics: true, Advertising: true },
    });

    // The CLI shows the reason in the message's timeline.
    const filtered = sent.find((s) => s.type === "alias" && s.caseName === "analyticsOnly")!;
    const shown = await hookpost(["messages", "show", filtered.messageId], {
      HOOKPOST_ENDPOINT: stack.ingest.address,
      ADMIN_TOKEN: STACK_ADMIN_TOKEN,
    });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(
      new RegExp(`${ids.both}\\s+filtered: consent \\("Advertising" not granted\\)`),
    );
    expect(shown.stdout).toMatch(new RegExp(`${ids.open}\\s+delivered`));
  });

  it("a user's deletion reaches every destination, whatever its consent settings", async () => {
    const before = Object.fromEntries(NAMES.map((n) => [n, rx[n]!.requests.length]));
    const admin = createClient(IngestService, stack.ingest.address, {
      metadata: adminMetadata(STACK_ADMIN_TOKEN),
    });
    try {
      const r = await admin.delete({ userId: "u-consent" });
      expect(r.sourceIds).toEqual([src.id]);
    } finally {
      admin.close();
    }
    const notice = (name: DestName) =>
      rx[name]!.requests.slice(before[name]).find((q) => JSON.parse(q.body.toString()).type === "delete");
    for (const name of NAMES) {
      await until(() => notice(name), { timeout: 20_000, message: `the deletion notice at ${name}` });
      expect(JSON.parse(notice(name)!.body.toString())).toMatchObject({
        type: "delete",
        userId: "u-consent",
      });
    }
  });

  it("a call whose consent leaves no destination is acked and counted as filtered", async () => {
    const solo = await stack.source("solo");
    const only = await Receiver.http();
    rx.only = only;
    const d = await stack.destination({
      name: "only",
      sourceIds: [solo.id],
      urls: [only.url()],
      consentCategories: ["Advertising"],
      consentMissing: ConsentMissing.FILTER,
    });
    const metrics = stack.dispatchers[0]!.metrics.registry;
    const filteredBefore = await counterValue(metrics, "hookpost_dispatcher_events_routed_total", {
      outcome: "filtered",
    });
    const { messageId } = await solo.client.track({ userId: "u-solo", event: "Viewed" });
    const m = await until(
      async () =>
        (await code(stack.admin.getMessage({ messageId }))) === "OK" &&
        (await stack.admin.getMessage({ messageId })),
      { message: "the timeline of the filtered call" },
    );
    expect(m.noDestination).toBe(false);
    expect(m.deliveries).toEqual([
      expect.objectContaining({
        destinationId: d.id,
        state: DeliveryState.FILTERED,
        filterReason: "consent: no consent object",
      }),
    ]);
    expect(
      await counterValue(metrics, "hookpost_dispatcher_events_routed_total", { outcome: "filtered" }),
    ).toBe(filteredBefore + 1);
    // Acked: nothing waits on EVENTS for the router, nor on DELIVERIES for the destination.
    const jsm = await stack.nc.jetstreamManager();
    await until(
      async () => {
        const router = await jsm.consumers.info(EVENTS_STREAM, ROUTER_CONSUMER);
        return router.num_pending === 0 && router.num_ack_pending === 0;
      },
      { message: "every call routed and acked" },
    );
    const [health] = (await stack.admin.listDestinationHealth({ destinationId: d.id })).destinations;
    expect(health!.backlog).toBe(0n);
    expect(only.requests).toHaveLength(0);
  });
});
