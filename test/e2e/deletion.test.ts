import { createHmac } from "node:crypto";
import { adminMetadata, createClient } from "@hookpost/client";
import { Code, HookpostError } from "@hookpost/contract";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { STACK_OPTIONS, settledCount } from "./helpers.js";

/*
 * Deletion requests (SPEC section 6) through the real pipeline: Delete (admin token) -> the
 * user-source index -> one `delete` call per source on JetStream -> dispatcher -> every enabled
 * destination of those sources.
 *
 * Sources A and B; u1 seen only via A, u2 via both. Destinations: A -> d1 (enabled),
 * A -> d2 (disabled), B -> d3 (enabled), each with a receiver of its own.
 */

let stack: Stack;
/** IngestService with the admin token (Delete needs it). */
const ingestAsAdmin = (address: string) =>
  createClient(IngestService, address, { metadata: adminMetadata(STACK_ADMIN_TOKEN) });

let admin: ReturnType<typeof ingestAsAdmin>;
let a: { id: string; client: IngestClient };
let b: { id: string; client: IngestClient };
let d1: Receiver;
let d2: Receiver;
let d3: Receiver;

/** d1 signs: a deletion notice is delivered under the same rules as any event. */
const D1_SECRET = "d1-shared-secret";
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

beforeAll(async () => {
  stack = await Stack.start(STACK_OPTIONS);
  admin = ingestAsAdmin(stack.ingest.address);
  [d1, d2, d3] = await Promise.all([Receiver.http(), Receiver.http(), Receiver.http()]);
  a = await stack.source("A");
  b = await stack.source("B");
  await stack.destination({ name: "d1", sourceIds: [a.id], urls: [d1.url()], sharedSecret: D1_SECRET });
  await stack.destination({ name: "d2", sourceIds: [a.id], urls: [d2.url()], enabled: false });
  await stack.destination({ name: "d3", sourceIds: [b.id], urls: [d3.url()] });

  // u1 only via A; u2 via A and B. The calls themselves are delivered first, then forgotten
  // by the receivers, so that what follows is only deletion notices.
  await a.client.identify({ userId: "u1", traits: { plan: "free" } });
  await a.client.track({ userId: "u1", event: "Clicked" });
  await a.client.track({ userId: "u2", event: "Clicked" });
  await b.client.page({ userId: "u2", name: "Home" });
  await d1.waitFor(3);
  await d3.waitFor(1);
  expect(await settledCount(d1, 300)).toBe(3);
  expect(d2.requests).toHaveLength(0);
  reset();
});

afterAll(async () => {
  admin?.close();
  await Promise.all([d1, d2, d3].map((r) => r?.close()));
  await stack?.close();
});

function reset(): void {
  for (const r of [d1, d2, d3]) r.requests.splice(0);
}

/** The one notice a receiver got: its exact body, checked byte for byte against `userId`. */
/** Deletes `userId`: the sources that saw it are `sourceIds`, and `rx` gets exactly one notice. */
async function deleteNotifiesOnly(userId: string, sourceIds: string[], rx: Receiver) {
  const before = Date.now();
  const r = await admin.delete({ userId });
  const after = Date.now();
  expect(r.sourceIds).toEqual(sourceIds);
  await rx.waitFor(1);
  expect(await settledCount(rx)).toBe(1);
  expectNotice(rx, userId, before, after);
  return r;
}

function expectNotice(r: Receiver, userId: string, before: number, after: number): string {
  expect(r.requests).toHaveLength(1);
  const req = r.requests[0]!;
  const text = req.body.toString();
  const timestamp = (JSON.parse(text) as { timestamp: string }).timestamp;
  expect(timestamp).toMatch(ISO_MS);
  const at = Date.parse(timestamp);
  expect(at).toBeGreaterThanOrEqual(before);
  expect(at).toBeLessThanOrEqual(after);
  expect(text).toBe(`{"type":"delete","userId":"${userId}","timestamp":"${timestamp}"}`);
  expect(Object.keys(JSON.parse(text) as object)).toEqual(["type", "userId", "timestamp"]);
  expect(req.method).toBe("POST");
  expect(req.headers["content-type"]).toBe("application/json");
  expect(req.headers["user-agent"]).toBe("Hookpost/1.0");
  const signature = createHmac("sha1", D1_SECRET).update(req.body).digest("hex");
  if (r === d1) expect(req.headers["x-signature"]).toBe(signature);
  else expect(req.headers["x-signature"]).toBeUndefined();
  const id = String(req.headers["idempotency-key"]);
  expect(id).not.toBe("undefined");
  return id;
}

describe("deletion requests end to end", () => {
  it("Delete needs the admin token, not a write key", async () => {
    const err = await a.client.delete({ userId: "u1" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HookpostError);
    expect((err as HookpostError).code).toBe(Code.UNAUTHENTICATED);
  });

  it("a user seen only via A: only A's enabled destination gets the exact notice", async () => {
    const r = await deleteNotifiesOnly("u1", [a.id], d1);
    expect(r.requestId).not.toBe("");
    expect(d2.requests).toHaveLength(0); // disabled
    expect(d3.requests).toHaveLength(0); // B never saw u1
    reset();
  });

  it("a user seen via A and B: both sources are notified", async () => {
    const before = Date.now();
    const r = await admin.delete({ userId: "u2" });
    const after = Date.now();
    expect([...r.sourceIds].sort()).toEqual([a.id, b.id].sort());

    await d1.waitFor(1);
    await d3.waitFor(1);
    expect(await settledCount(d1)).toBe(1);
    expect(d3.requests).toHaveLength(1);
    const id1 = expectNotice(d1, "u2", before, after);
    const id3 = expectNotice(d3, "u2", before, after);
    expect(id1).not.toBe(id3); // one notification per source
    expect(d2.requests).toHaveLength(0);
    reset();
  });

  it("a user never seen: success with an empty list, nothing delivered", async () => {
    const r = await admin.delete({ userId: "nobody-ever" });
    expect(r.sourceIds).toEqual([]);
    expect(r.requestId).not.toBe("");
    await settledCount(d1);
    for (const rx of [d1, d2, d3]) expect(rx.requests).toHaveLength(0);
  });

  it('integrations {"All": false} on the calls does not prevent the deletion notice', async () => {
    await a.client.identify({ userId: "u3", traits: { plan: "pro" }, integrations: { All: false } });
    await a.client.track({ userId: "u3", event: "Quiet", integrations: { All: false, Webhooks: false } });
    // The calls themselves are filtered out: a marker call sent after them arrives alone.
    await a.client.track({ userId: "marker", event: "Marker" });
    await d1.waitFor(1);
    expect(await settledCount(d1, 400)).toBe(1);
    expect(JSON.parse(d1.requests[0]!.body.toString())).toMatchObject({ userId: "marker" });
    reset();

    await deleteNotifiesOnly("u3", [a.id], d1);
    expect(d2.requests).toHaveLength(0);
    expect(d3.requests).toHaveLength(0);
    reset();
  });

  it("a user known only from an audience sync is found as well", async () => {
    const c = await stack.source("C");
    const d4 = await Receiver.http();
    try {
      await stack.destination({ name: "d4", sourceIds: [c.id], urls: [d4.url()] });
      await c.client.syncAudience([{ audienceName: "Trial Users" }, { userIds: ["synced-only"] }]);
      await d4.waitFor(1);
      d4.requests.splice(0);

      await deleteNotifiesOnly("synced-only", [c.id], d4);
      for (const rx of [d1, d2, d3]) expect(rx.requests).toHaveLength(0);
    } finally {
      await d4.close();
    }
  });
});
