import { ActorKind } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { A, B, B_HOOK, grpcAdmin, SHARED, startWorld, type World } from "./portal-world.js";

// ListAuditRecords through a portal link reads the history of its source and of its own
// destinations. The log is filtered by id, and ids are unique per kind only: a destination may
// bear a source's id, and one record may hold changes of several resources. Neither may open
// another source's history to the link.

let world: World;
let tokenA: string;

beforeAll(async () => {
  world = await startWorld();
  tokenA = (await world.stack.admin.createPortalLink({ sourceId: A, name: "A support" })).token;
}, 120_000);

afterAll(async () => {
  await world?.close();
});

const text = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? String(x) : x));

describe("the audit log through a portal link", () => {
  it("a destination the link names after source B shows its own history, none of source B's", async () => {
    const admin = world.stack.admin;
    await admin.updateSource({
      source: { id: B, allowedOrigins: ["https://shop-of-b.example.com"] },
      updateMask: { paths: ["allowed_origins"] },
    });
    await admin.createPortalLink({ sourceId: B, name: "B's support desk" });
    const a = grpcAdmin(world.stack, tokenA);
    // Ids are unique per kind: a link may give its destination the id of another source.
    await a.createDestination({
      destination: { id: B, name: "named after B", urls: [world.stack.receiver.url("/a2")] },
    });
    const records = (await a.listAuditRecords({ resourceId: B })).records;
    a.close();
    const created = records.find((r) => r.action === "CreateDestination");
    expect(created?.actorKind).toBe(ActorKind.PORTAL_LINK);
    expect(records.map((r) => r.action)).not.toContain("CreateSource");
    expect(records.map((r) => r.action)).not.toContain("UpdateSource");
    expect(records.map((r) => r.action)).not.toContain("CreatePortalLink");
    expect(text(records)).not.toContain("shop-of-b.example.com");
    expect(text(records)).not.toContain("B's support desk");
    expect(text(records)).not.toContain("Tenant B");
  });

  it("a shared destination left to A by B's deletion shows that change, not B's other destinations", async () => {
    // SHARED was connected to A and B: deleting source B leaves it A's alone, and the record of
    // the deletion also holds B_HOOK's change (disconnected), URLs and all.
    await world.stack.admin.deleteSource({ id: B });
    const a = grpcAdmin(world.stack, tokenA);
    const records = (await a.listAuditRecords({ resourceId: SHARED })).records;
    a.close();
    const deletion = records.find((r) => r.action === "DeleteSource");
    expect(deletion?.changes.map((c) => c.resourceId)).toEqual([SHARED]);
    expect(text(records)).not.toContain(B_HOOK);
    expect(text(records)).not.toContain(world.stack.receiver.url("/b"));
  });
});
