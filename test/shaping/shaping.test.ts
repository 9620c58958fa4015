import { AttemptOutcome, DeliveryState, HttpMethod } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { verifyStandardWebhook } from "@hookpost/receiver";
import { describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { code } from "../helpers/grpc-code.js";
import { until } from "../helpers/until.js";
import { useReceiverStack } from "../helpers/use-receiver-stack.js";

/**
 * Routing and shaping per destination (issue 27, docs/design/shaping.md) end to end: real ingest,
 * NATS, dispatcher and receivers. Each destination has its own receiver, so what one gets is
 * exactly what its filter, mapping, method and templates made of the calls sent.
 */

const SECRET = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
const { stack, src, rx } = useReceiverStack("shaping", ["crm", "events", "broken", "hostile", "healthy"], {
  ...STACK_OPTIONS,
  dispatcher: { ...STACK_OPTIONS.dispatcher, retryBaseDelayMs: 200 },
});

const CRM_MAPPING = `{"id": userId, "email": traits.email, "kind": type, "message": $messageId, "source": $sourceId}`;

async function crm() {
  return stack.destination({
    name: "crm",
    sourceIds: [src.id],
    urls: [rx.crm!.url("/contacts/{{ userId }}?kind={{ type }}")],
    headers: { "X-User": "user {{ userId }}", "X-Static": "kept" },
    method: HttpMethod.PUT,
    mapping: CRM_MAPPING,
    filter: { types: ["identify"] },
    signing: 2, // SIGNING_STANDARD_WEBHOOKS
    sharedSecret: SECRET,
  });
}

describe("routing and shaping", () => {
  it("a mapping, PUT and URL and header templates reach the receiver exactly as the dry run shows them", async () => {
    const dest = await crm();
    const call = {
      type: "identify",
      userId: "u/1 ?x",
      messageId: "shape-1",
      timestamp: "2026-11-25T10:00:00.000Z",
      traits: { email: "a@example.com", plan: "pro" },
    };
    const dry = await stack.admin.dryRunDestination({
      destination: { case: "destinationId", value: dest.id },
      callJson: JSON.stringify(call),
    });
    expect(dry.error).toBe("");
    expect(dry.filteredReason).toBe("");
    expect(dry.requests).toHaveLength(1);
    const planned = dry.requests[0]!;
    expect(planned.method).toBe("PUT");
    // The user id is one path segment however it is spelled: encoded, never a new segment or query.
    expect(planned.url).toBe(rx.crm!.url("/contacts/u%2F1%20%3Fx?kind=identify"));
    expect(JSON.parse(planned.body)).toEqual({
      id: "u/1 ?x",
      email: "a@example.com",
      kind: "identify",
      message: "shape-1",
      source: src.id,
    });
    // The dry run's signature verifies on its own: it is a request the receiver would accept.
    verifyStandardWebhook(planned.body, planned.headers, SECRET);

    await src.client.identify({
      userId: call.userId,
      messageId: call.messageId,
      timestamp: new Date(call.timestamp),
      traits: call.traits,
    } as never);
    const [got] = await rx.crm!.waitFor(1);
    expect(got!.method).toBe("PUT");
    expect(`http://${got!.headers.host}${got!.url}`).toBe(planned.url);
    expect(got!.body.toString()).toBe(planned.body);
    // Every header the dry run lists arrives with the same value, but the time-bound signature.
    for (const [name, value] of Object.entries(planned.headers)) {
      if (/^webhook-(timestamp|signature)$/i.test(name)) continue;
      expect([name, got!.headers[name.toLowerCase()]]).toEqual([name, value]);
    }
    expect(got!.headers["x-user"]).toBe("user u/1 ?x");
    expect(got!.headers["x-static"]).toBe("kept");
    verifyStandardWebhook(got!.body, got!.headers as Record<string, string>, SECRET);
  });

  it("a filter on types, events and an expression delivers only what passes; the timeline says filtered and why", async () => {
    const dest = await stack.destination({
      name: "events",
      sourceIds: [src.id],
      urls: [rx.events!.url("/events")],
      method: HttpMethod.PATCH,
      filter: { types: ["track"], events: ["Signed Up"], expression: `properties.plan = "pro"` },
    });
    const sent = {
      pass: await src.client.track({ userId: "f1", event: "Signed Up", properties: { plan: "pro" } }),
      expression: await src.client.track({ userId: "f1", event: "Signed Up", properties: { plan: "free" } }),
      event: await src.client.track({ userId: "f1", event: "Logged In", properties: { plan: "pro" } }),
      type: await src.client.page({ userId: "f1", name: "Home" }),
    };
    const [got] = await rx.events!.waitFor(1);
    expect(got!.method).toBe("PATCH");
    expect(JSON.parse(got!.body.toString())).toMatchObject({ type: "track", event: "Signed Up" });
    for (const [why, { messageId }] of Object.entries(sent)) {
      if (why === "pass") continue;
      const timeline = await until(
        async () => {
          if ((await code(stack.admin.getMessage({ messageId }))) !== "OK") return undefined;
          const m = await stack.admin.getMessage({ messageId });
          return m.deliveries.find((d) => d.destinationId === dest.id && d.filterReason !== "");
        },
        { timeout: 15_000, message: `${why}: the timeline of ${messageId} says filtered` },
      );
      expect(timeline.filterReason).toBe(`filter: ${why}`);
    }
    // The one that passed is the only one the receiver ever got.
    await rx.events!.waitFor(1);
    expect(rx.events!.requests.map((r) => r.headers["idempotency-key"])).toEqual([sent.pass.messageId]);
  });

  it("a mapping that fails is a not-sent attempt with the reason, and fixing it lets the retries through", async () => {
    const dest = await stack.destination({
      name: "broken",
      sourceIds: [src.id],
      urls: [rx.broken!.url("/broken")],
      mapping: `{"n": $number(traits.name)}`,
      filter: { types: ["identify"] },
    });
    const { messageId } = await src.client.identify({ userId: "b1", traits: { name: "not a number" } });
    const failed = await until(
      async () => {
        const r = await stack.admin.listAttempts({ destinationId: dest.id, messageId });
        return r.attempts.find((a) => a.reason.includes("mapping failed"));
      },
      { timeout: 15_000, message: "a failed attempt recorded with the mapping's error" },
    );
    expect(failed.reason).toContain("not sent: mapping failed");
    expect(rx.broken!.requests).toHaveLength(0);

    const fixed = await stack.admin.updateDestination({
      destination: { id: dest.id, mapping: `{"name": traits.name}` },
      updateMask: { paths: ["mapping"] },
    });
    expect(fixed.destination?.mapping).toBe(`{"name": traits.name}`);
    const [got] = await rx.broken!.waitFor(1, 15_000);
    expect(JSON.parse(got!.body.toString())).toEqual({ name: "not a number" });
  });

  it("hostile expressions are refused when applied, with the field and the position", async () => {
    const refused = async (init: Record<string, unknown>) => {
      const err = await stack.admin
        .createDestination({
          destination: { name: "bad", sourceIds: [src.id], urls: [rx.hostile!.url("/x")], ...init },
        })
        .then(
          () => undefined,
          (e: Error) => e,
        );
      expect(err, JSON.stringify(init)).toBeDefined();
      return err!.message;
    };
    expect(await refused({ mapping: `{"a": $match(userId, /(a+)+$/)}` })).toMatch(
      /destination\.mapping.*position \d+: regular expressions are not allowed/,
    );
    expect(await refused({ filter: { expression: `$sum([1..10000000]) > 0` } })).toMatch(
      /destination\.filter\.expression.*at most 10000 items/,
    );
    expect(await refused({ mapping: `{"a": userId` })).toMatch(/destination\.mapping.*position \d+/);
    expect(await refused({ urls: [rx.hostile!.url("/x").replace("127.0.0.1", "{{ userId }}")] })).toMatch(
      /path and query only/,
    );
    expect(await refused({ headers: { "X-A": "{{ userId" } })).toMatch(/not closed/);
    expect(await refused({ filter: { types: ["purchase"] } })).toMatch(/unknown call type "purchase"/);
  });

  it("a mapping that never ends is stopped and recorded, and other destinations keep delivering", async () => {
    const hostile = await stack.destination({
      name: "hostile",
      sourceIds: [src.id],
      urls: [rx.hostile!.url("/loop")],
      mapping: `( $f := function($n){ $f($n + 1) }; $f(0) )`,
      filter: { events: ["Loop"] },
    });
    const healthy = await stack.destination({
      name: "healthy",
      sourceIds: [src.id],
      urls: [rx.healthy!.url("/ok")],
      filter: { events: ["Loop"] },
    });
    const { messageId } = await src.client.track({ userId: "h1", event: "Loop" });
    const stopped = await until(
      async () => {
        const r = await stack.admin.listAttempts({ destinationId: hostile.id, messageId });
        return r.attempts.find((a) => a.reason.includes("ran longer than"));
      },
      { timeout: 15_000, message: "the runaway mapping's attempt recorded" },
    );
    expect(stopped.reason).toMatch(/mapping failed: ran longer than 25 ms/);
    const [ok] = await rx.healthy!.waitFor(1);
    expect(ok!.headers["idempotency-key"]).toBe(messageId);
    expect(rx.hostile!.requests).toHaveLength(0);
    expect(healthy.id).not.toBe(hostile.id);
  });

  it("a filter changed while calls wait applies to them: recorded as filtered, never sent", async () => {
    const dest = await stack.destination({
      name: "paused",
      sourceIds: [src.id],
      urls: [rx.events!.url("/paused")],
      enabled: false,
      filter: { events: ["Waiting"] },
    });
    const { messageId } = await src.client.track({ userId: "w1", event: "Waiting" });
    // Routed while paused: it waits on the destination's lane.
    await until(
      async () => {
        if ((await code(stack.admin.getMessage({ messageId }))) !== "OK") return undefined;
        const m = await stack.admin.getMessage({ messageId });
        return m.deliveries.some((d) => d.destinationId === dest.id);
      },
      { timeout: 15_000, message: "the call routed to the paused destination" },
    );
    const updated = await stack.admin.updateDestination({
      destination: { id: dest.id, enabled: true, filter: { events: ["Something Else"] } },
      updateMask: { paths: ["enabled", "filter"] },
    });
    expect(updated.destination?.filter?.events).toEqual(["Something Else"]);
    const attempt = await until(
      async () => {
        const r = await stack.admin.listAttempts({ destinationId: dest.id, messageId });
        return r.attempts[0];
      },
      { timeout: 15_000, message: "the waiting call's attempt recorded" },
    );
    expect(attempt.outcome).toBe(AttemptOutcome.FILTERED);
    expect(attempt.reason).toBe("filtered: filter: event");
    const m = await stack.admin.getMessage({ messageId });
    const mine = m.deliveries.find((d) => d.destinationId === dest.id);
    expect(mine?.state).toBe(DeliveryState.FILTERED);
    expect(rx.events!.requests.some((r) => r.url === "/paused")).toBe(false);
  });

  it("a URL placeholder cannot remove a path segment or carry half a surrogate pair: refused with the field named", async () => {
    // A browser visitor may pick their own anonymousId: ".." in the path would send the signed
    // request elsewhere on the customer's host (URL parsing resolves dot segments, encoded or not).
    const draft = {
      name: "dots",
      sourceIds: [src.id],
      urls: [rx.crm!.url("/users/{{ userId }}/events?u={{ userId }}")],
    };
    const dry = (call: object | string) =>
      stack.admin.dryRunDestination({
        destination: { case: "draft", value: draft },
        callJson: typeof call === "string" ? call : JSON.stringify(call),
      });
    for (const userId of ["..", "."]) {
      const refused = await dry({ type: "track", userId, event: "E" });
      expect(refused.error).toContain(
        `urls[0] failed: the placeholder gave "${userId}", which would change the URL's path`,
      );
      expect(refused.requests).toHaveLength(0);
    }
    // Dots inside a segment, or a whole value in the query, change nothing.
    expect((await dry({ type: "track", userId: "a..", event: "E" })).requests[0]!.url).toBe(
      rx.crm!.url("/users/a../events?u=a.."),
    );
    const query = await stack.admin.dryRunDestination({
      destination: { case: "draft", value: { ...draft, urls: [rx.crm!.url("/users?u={{ userId }}")] } },
      callJson: JSON.stringify({ type: "track", userId: "..", event: "E" }),
    });
    expect(query.requests[0]!.url).toBe(rx.crm!.url("/users?u=.."));
    // JSON may carry half a surrogate pair; it has no UTF-8 to percent-encode.
    const lone = await dry('{"type":"track","userId":"a\\ud83d","event":"E"}');
    expect(lone.error).toContain(
      "urls[0] failed: the placeholder gave text with half a UTF-16 surrogate pair",
    );

    // Sent for real: a not-sent attempt with that reason, no request anywhere.
    const dest = await stack.destination({
      ...draft,
      urls: [rx.crm!.url("/dots/{{ userId }}")],
      filter: { types: ["track"] },
    });
    const before = rx.crm!.requests.length;
    const { messageId } = await src.client.track({ userId: "..", event: "Dots" });
    const failed = await until(
      async () =>
        (await stack.admin.listAttempts({ destinationId: dest.id, messageId })).attempts.find((a) =>
          a.reason.includes("which would change the URL's path"),
        ),
      { timeout: 15_000, message: "a not-sent attempt naming the URL placeholder" },
    );
    expect(failed.outcome).toBe(AttemptOutcome.NOT_SENT);
    expect(
      rx.crm!.requests.slice(before).filter((r) => r.url.startsWith("/dots") || r.url === "/"),
    ).toHaveLength(0);
    await stack.admin.deleteDestination({ id: dest.id });
  });

  it("a dry run of a draft needs no stored destination and says when a call is filtered", async () => {
    const draft = {
      name: "draft",
      sourceIds: [src.id],
      urls: [rx.crm!.url("/draft")],
      filter: { types: ["track"] },
    };
    const filtered = await stack.admin.dryRunDestination({
      destination: { case: "draft", value: draft },
      callJson: JSON.stringify({ type: "identify", userId: "d1" }),
    });
    expect(filtered.filteredReason).toBe("filter: type");
    expect(filtered.requests).toHaveLength(0);
    const sent = await stack.admin.dryRunDestination({
      destination: { case: "draft", value: draft },
      callJson: JSON.stringify({ type: "track", userId: "d1", event: "E" }),
    });
    expect(sent.requests[0]?.method).toBe("POST");
    expect(JSON.parse(sent.requests[0]!.body)).toMatchObject({ type: "track", userId: "d1", event: "E" });
    const bad = await code(
      stack.admin.dryRunDestination({ destination: { case: "draft", value: draft }, callJson: "{" }),
    );
    expect(bad).toBe("INVALID_ARGUMENT");
    expect((await stack.admin.listDestinations({})).destinations.map((d) => d.name)).not.toContain("draft");
  });
});
