/**
 * Real npm SDKs that speak Segment's HTTP Tracking API send every call type to Hookpost with only
 * their host changed; the webhook receiver gets exactly the SPEC section 5 bodies, signed, each once.
 */
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { CALL_TYPES, type CallType } from "@hookpost/contract";
import RudderAnalytics from "@rudderstack/rudder-sdk-node";
import { Analytics as SegmentAnalytics } from "@segment/analytics-node";
import { beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS, settledCount } from "../e2e/helpers.js";
import type { Receiver } from "../helpers/receiver.js";
import { receiverLane } from "../helpers/receiver-lane.js";
import { useStack } from "../helpers/use-stack.js";

const SECRET = "sdk-s3cret";
const AT = "2026-11-21T09:30:00.000Z";
const stack = useStack({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0" } });
let base: string;

beforeAll(() => {
  base = `http://${stack.ingest.httpAddress}`;
});

/** A source and a destination of its own (its own receiver), so each SDK's requests are apart. */
const lane = (name: string) => receiverLane(stack, name, { sharedSecret: SECRET });

const version = (pkg: string) =>
  (JSON.parse(readFileSync(`node_modules/${pkg}/package.json`, "utf8")) as { version: string }).version;

/** The six calls each SDK sends (ids chosen by the test, to follow each one). */
function calls(prefix: string) {
  // What all six share: the id names the call's type.
  const call = (type: string) => ({ messageId: `${prefix}-${type}`, userId: "u-1", timestamp: new Date(AT) });
  return {
    identify: { ...call("identify"), traits: { plan: "pro" } },
    track: { ...call("track"), event: "Order Completed", properties: { total: 12.5 } },
    page: { ...call("page"), name: "Home", category: "Docs", properties: { path: "/" } },
    screen: { ...call("screen"), name: "Main" },
    group: { ...call("group"), groupId: "g-1", traits: { size: 3 } },
    alias: { ...call("alias"), previousId: "anon-1" },
  };
}

/** SPEC section 5, written out by hand: keys in this order, nothing else. */
function expectedBodies(
  context: (type: string) => object,
  pageProperties: object = { path: "/", name: "Home", category: "Docs" },
): Record<string, string> {
  const j = JSON.stringify;
  return {
    identify: j({
      version: 1,
      type: "identify",
      userId: "u-1",
      traits: { plan: "pro" },
      timestamp: AT,
      context: context("identify"),
    }),
    track: j({
      version: 1,
      type: "track",
      userId: "u-1",
      event: "Order Completed",
      properties: { total: 12.5 },
      timestamp: AT,
      context: context("track"),
    }),
    page: j({
      version: 1,
      type: "page",
      userId: "u-1",
      properties: pageProperties,
      timestamp: AT,
      context: context("page"),
    }),
    screen: j({
      version: 1,
      type: "screen",
      userId: "u-1",
      name: "Main",
      timestamp: AT,
      context: context("screen"),
    }),
    group: j({
      version: 1,
      type: "group",
      groupId: "g-1",
      userId: "u-1",
      traits: { size: 3 },
      timestamp: AT,
      context: context("group"),
    }),
    alias: j({
      version: 1,
      type: "alias",
      timestamp: AT,
      "Previous ID": "anon-1",
      "User ID": "u-1",
      context: context("alias"),
    }),
  };
}

async function expectDelivered(rx: Receiver, prefix: string, bodies: Record<string, string>): Promise<void> {
  await rx.waitFor(6, 30_000);
  expect(await settledCount(rx, 1_000)).toBe(6);
  for (const [type, body] of Object.entries(bodies)) {
    const got = rx.requests.filter((r) => r.headers["idempotency-key"] === `${prefix}-${type}`);
    expect(got, type).toHaveLength(1);
    expect(got[0]!.body.toString(), type).toBe(body);
    expect(got[0]!.headers["x-signature"]).toBe(
      createHmac("sha1", SECRET).update(got[0]!.body).digest("hex"),
    );
  }
}

/** One call of each type through an SDK (both SDKs name their methods after the call types). */
function sendEveryType(sdk: object, prefix: string) {
  const c = calls(prefix);
  for (const type of CALL_TYPES) (sdk as Record<CallType, (call: unknown) => unknown>)[type](c[type]);
}

describe("SDKs of the Segment HTTP API, with only the host changed", () => {
  it("@segment/analytics-node delivers every call type once, byte-exact, signed", async () => {
    const { writeKey, rx } = await lane("segment-node");
    const errors: unknown[] = [];
    const a = new SegmentAnalytics({ writeKey, host: base, flushInterval: 200 });
    a.on("error", (err) => errors.push(err));
    sendEveryType(a, "seg");
    await a.closeAndFlush({ timeout: 20_000 });
    expect(errors).toEqual([]);
    const library = { name: "@segment/analytics-node", version: version("@segment/analytics-node") };
    // analytics-node itself copies a page's category and name into its properties (in that order).
    const pageProperties = { path: "/", category: "Docs", name: "Home" };
    await expectDelivered(
      rx,
      "seg",
      expectedBodies(() => ({ library }), pageProperties),
    );
    await rx.close();
  }, 90_000);

  it("@rudderstack/rudder-sdk-node (gzip bodies) delivers every call type once, byte-exact, signed", async () => {
    const { writeKey, rx } = await lane("rudder-node");
    const errors: unknown[] = [];
    const a = new RudderAnalytics(writeKey, {
      dataPlaneUrl: base,
      flushInterval: 200,
      logLevel: "error",
      errorHandler: (err: unknown) => errors.push(err),
    } as ConstructorParameters<typeof RudderAnalytics>[1]);
    sendEveryType(a, "rudder");
    await a.flush();
    expect(errors).toEqual([]);
    const library = { name: "analytics-node", version: version("@rudderstack/rudder-sdk-node") };
    // Rudder copies identify traits into context.traits.
    await expectDelivered(
      rx,
      "rudder",
      expectedBodies((type) => (type === "identify" ? { traits: { plan: "pro" }, library } : { library })),
    );
    await rx.close();
  }, 90_000);
});
