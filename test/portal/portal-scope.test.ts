import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { inPortalScope, PORTAL_SCOPE, Scope } from "@hookpost/api";
import { ActorKind, AdminService, AuditOutcome } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import {
  A,
  A_HOOK,
  type Admin,
  B,
  B_HOOK,
  codeOf,
  connectAdmin,
  grpcAdmin,
  SHARED,
  startWorld,
  storeExpiredLink,
  type World,
} from "./portal-world.js";

// The scope of a portal link, enforced by the server on every AdminService method: a link for
// source A reads and changes A's world (its source, its destinations, their attempts, dead letters,
// messages, health) and nothing else. The table below has one row per method of the descriptor;
// a method added to admin.proto fails "every method has a row" until someone decides its scope.

let world: World;
/** Portal tokens for source A: read and write, read-only; and one for B. */
let tokenA: string;
let tokenAReadOnly: string;
let linkA: string;
let linkB: string;

beforeAll(async () => {
  world = await startWorld();
  const admin = world.stack.admin;
  const a = await admin.createPortalLink({ sourceId: A, name: "A support" });
  const ro = await admin.createPortalLink({
    sourceId: A,
    readOnly: true,
    lifetime: durationFromMs(3_600_000),
  });
  const b = await admin.createPortalLink({ sourceId: B });
  tokenA = a.token;
  tokenAReadOnly = ro.token;
  linkA = a.portalLink!.id;
  linkB = b.portalLink!.id;
}, 120_000);

afterAll(async () => {
  await world?.close();
});

type Call = (c: Admin) => Promise<unknown>;

/**
 * One row per AdminService method. `reads`: calls a link for A makes successfully, read-only
 * or not (they check that answers are narrowed to A's world). `writes`: calls that succeed with a
 * read-write link for A and are PERMISSION_DENIED to a read-only one. `denied`: calls that touch
 * source B, a destination of B (or shared with B), or anything global: PERMISSION_DENIED to both.
 */
interface Row {
  reads?: Call[];
  writes?: Call[];
  denied: Call[];
}

const ids = (list: { id: string }[]) => list.map((x) => x.id).sort();
const CALL = JSON.stringify({ type: "track", userId: "u1", event: "Dry run" });
const draft = (sourceIds: string[]) => ({
  destination: {
    case: "draft" as const,
    value: { name: "draft", sourceIds, urls: ["https://example.com/h"] },
  },
  callJson: CALL,
});

/** What a link for A lists: something, and all of it of source A. */
function expectAllOfA(list: { sourceId: string }[]): void {
  expect(list.length).toBeGreaterThan(0);
  for (const x of list) expect(x.sourceId).toBe(A);
}

/** A destination of A made by the admin, for the calls that delete one. */
async function adminDestinationOfA(): Promise<string> {
  const r = await world.stack.admin.createDestination({
    destination: { name: "temporary", sourceIds: [A], urls: ["https://example.com/t"] },
  });
  return r.destination!.id;
}

const ROWS: Record<string, Row> = {
  createSource: { denied: [(c) => c.createSource({ name: "mine" })] },
  getSource: {
    reads: [async (c) => expect((await c.getSource({ id: A })).source?.id).toBe(A)],
    denied: [(c) => c.getSource({ id: B }), (c) => c.getSource({ id: "no-such-source" })],
  },
  listSources: {
    // The sources a link sees: its own, whatever else exists.
    reads: [async (c) => expect(ids((await c.listSources({})).sources)).toEqual([A])],
    denied: [],
  },
  deleteSource: { denied: [(c) => c.deleteSource({ id: A }), (c) => c.deleteSource({ id: B })] },
  updateSource: {
    denied: [
      (c) => c.updateSource({ source: { id: A, name: "renamed" }, updateMask: { paths: ["name"] } }),
      (c) => c.updateSource({ source: { id: B, allowedOrigins: ["https://x.example"] } }),
    ],
  },
  rotateWriteKey: { denied: [(c) => c.rotateWriteKey({ id: A }), (c) => c.rotateWriteKey({ id: B })] },

  createDestination: {
    writes: [
      async (c) => {
        const r = await c.createDestination({
          destination: { name: "A's new hook", sourceIds: [A], urls: [world.stack.receiver.url("/a2")] },
        });
        expect(r.destination?.sourceIds).toEqual([A]);
      },
      // source_ids left empty: the link's source.
      async (c) => {
        const r = await c.createDestination({
          destination: { name: "A's other hook", urls: [world.stack.receiver.url("/a3")] },
        });
        expect(r.destination?.sourceIds).toEqual([A]);
      },
    ],
    denied: [
      (c) =>
        c.createDestination({ destination: { name: "x", sourceIds: [B], urls: ["https://example.com/x"] } }),
      (c) =>
        c.createDestination({
          destination: { name: "x", sourceIds: [A, B], urls: ["https://example.com/x"] },
        }),
    ],
  },
  getDestination: {
    reads: [
      async (c) => expect((await c.getDestination({ id: A_HOOK })).destination?.sourceIds).toEqual([A]),
      // A shared destination is readable; B is not named in it.
      async (c) => expect((await c.getDestination({ id: SHARED })).destination?.sourceIds).toEqual([A]),
    ],
    denied: [(c) => c.getDestination({ id: B_HOOK }), (c) => c.getDestination({ id: "no-such-hook" })],
  },
  listDestinations: {
    reads: [
      async (c) => {
        const list = (await c.listDestinations({})).destinations;
        expect(list.map((d) => d.id)).toEqual(expect.arrayContaining([A_HOOK, SHARED]));
        expect(list.map((d) => d.id)).not.toContain(B_HOOK);
        for (const d of list) expect(d.sourceIds).toEqual([A]);
      },
      async (c) => expect(ids((await c.listDestinations({ sourceId: A })).destinations)).toContain(A_HOOK),
    ],
    denied: [(c) => c.listDestinations({ sourceId: B })],
  },
  updateDestination: {
    writes: [
      // Pause and resume: the console's switch.
      async (c) => {
        const paused = await c.updateDestination({
          destination: { id: A_HOOK, enabled: false },
          updateMask: { paths: ["enabled"] },
        });
        expect(paused.destination?.enabled).toBe(false);
        await c.updateDestination({
          destination: { id: A_HOOK, enabled: true },
          updateMask: { paths: ["enabled"] },
        });
      },
      // An edit that keeps it A's alone.
      (c) =>
        c.updateDestination({
          destination: { id: A_HOOK, name: "A's hook", sourceIds: [A] },
          updateMask: { paths: ["name", "source_ids"] },
        }),
    ],
    denied: [
      (c) =>
        c.updateDestination({
          destination: { id: B_HOOK, enabled: false },
          updateMask: { paths: ["enabled"] },
        }),
      // Shared with B: a change would act on B's deliveries too.
      (c) =>
        c.updateDestination({
          destination: { id: SHARED, enabled: false },
          updateMask: { paths: ["enabled"] },
        }),
      // Connecting A's destination to B.
      (c) =>
        c.updateDestination({
          destination: { id: A_HOOK, sourceIds: [A, B] },
          updateMask: { paths: ["source_ids"] },
        }),
    ],
  },
  deleteDestination: {
    writes: [async (c) => c.deleteDestination({ id: await adminDestinationOfA() })],
    denied: [(c) => c.deleteDestination({ id: B_HOOK }), (c) => c.deleteDestination({ id: SHARED })],
  },

  listDeadLetters: {
    reads: [
      // A's call on a-hook (until replayed) and on the shared hook; none of B's.
      async (c) => expectAllOfA((await c.listDeadLetters({})).deadLetters),
      async (c) =>
        expect(
          (await c.listDeadLetters({ destinationId: SHARED })).deadLetters.map((d) => d.sourceId),
        ).toEqual([A]),
    ],
    denied: [(c) => c.listDeadLetters({ destinationId: B_HOOK }), (c) => c.listDeadLetters({ sourceId: B })],
  },
  replayDeadLetters: {
    writes: [(c) => c.replayDeadLetters({ destinationId: A_HOOK })],
    denied: [
      (c) => c.replayDeadLetters({ destinationId: B_HOOK }),
      (c) => c.replayDeadLetters({ destinationId: SHARED }),
      (c) => c.replayDeadLetters({ destinationId: A_HOOK, sourceId: B }),
    ],
  },
  rotateSecret: {
    writes: [async (c) => expect((await c.rotateSecret({ destinationId: A_HOOK })).secret).not.toBe("")],
    denied: [
      (c) => c.rotateSecret({ destinationId: B_HOOK }),
      (c) => c.rotateSecret({ destinationId: SHARED }),
    ],
  },

  listAttempts: {
    reads: [
      async (c) => expectAllOfA((await c.listAttempts({})).attempts),
      (c) => c.listAttempts({ destinationId: A_HOOK }),
      // B's message id, unnamed source: A's world has no such message.
      async (c) => expect((await c.listAttempts({ messageId: world.messages.b })).attempts).toEqual([]),
    ],
    denied: [(c) => c.listAttempts({ destinationId: B_HOOK }), (c) => c.listAttempts({ sourceId: B })],
  },
  searchAttempts: {
    reads: [
      async (c) => expectAllOfA((await c.searchAttempts({})).entries),
      (c) => c.searchAttempts({ destinationId: A_HOOK }),
      async (c) => {
        // The shared destination's entries of A's calls only.
        for (const e of (await c.searchAttempts({ destinationId: SHARED })).entries)
          expect(e.sourceId).toBe(A);
      },
      async (c) => expect((await c.searchAttempts({ messageId: world.messages.b })).entries).toEqual([]),
    ],
    denied: [(c) => c.searchAttempts({ destinationId: B_HOOK }), (c) => c.searchAttempts({ sourceId: B })],
  },
  getAttemptLogInfo: { denied: [(c) => c.getAttemptLogInfo({})] },
  getMessage: {
    reads: [
      async (c) => expect((await c.getMessage({ messageId: world.messages.a })).sourceId).toBe(A),
      async (c) =>
        expect((await codeOf(c.getMessage({ messageId: world.messages.b })))?.code).toBe(Code.NotFound),
    ],
    denied: [(c) => c.getMessage({ messageId: world.messages.b, sourceId: B })],
  },
  listDestinationHealth: {
    reads: [
      async (c) => {
        const list = (await c.listDestinationHealth({})).destinations.map((h) => h.destinationId);
        expect(list).toEqual(expect.arrayContaining([A_HOOK, SHARED]));
        expect(list).not.toContain(B_HOOK);
      },
      (c) => c.listDestinationHealth({ destinationId: A_HOOK }),
      (c) => c.listDestinationHealth({ destinationId: SHARED }),
    ],
    denied: [(c) => c.listDestinationHealth({ destinationId: B_HOOK })],
  },
  listAuditRecords: {
    reads: [(c) => c.listAuditRecords({ resourceId: A }), (c) => c.listAuditRecords({ resourceId: A_HOOK })],
    denied: [
      (c) => c.listAuditRecords({}),
      (c) => c.listAuditRecords({ resourceId: B }),
      (c) => c.listAuditRecords({ resourceId: B_HOOK }),
      (c) => c.listAuditRecords({ resourceId: SHARED }),
    ],
  },
  reencryptSecrets: { denied: [(c) => c.reencryptSecrets({})] },
  getDeletion: { denied: [(c) => c.getDeletion({ requestId: world.deletionId })] },
  createOperatorWebhook: {
    denied: [(c) => c.createOperatorWebhook({ operatorWebhook: { url: "https://ops.example.com/in" } })],
  },
  getOperatorWebhook: { denied: [(c) => c.getOperatorWebhook({ id: "ops" })] },
  listOperatorWebhooks: { denied: [(c) => c.listOperatorWebhooks({})] },
  updateOperatorWebhook: {
    denied: [(c) => c.updateOperatorWebhook({ operatorWebhook: { id: "ops", url: "https://x.example/in" } })],
  },
  deleteOperatorWebhook: { denied: [(c) => c.deleteOperatorWebhook({ id: "ops" })] },
  dryRunDestination: {
    // A draft signs with its own secret: a read.
    reads: [async (c) => expect((await c.dryRunDestination(draft([A]))).requests).toHaveLength(1)],
    // A stored destination's dry run answers requests signed with its secret: a write.
    writes: [
      async (c) =>
        expect(
          (
            await c.dryRunDestination({
              destination: { case: "destinationId", value: A_HOOK },
              callJson: CALL,
            })
          ).requests,
        ).toHaveLength(1),
    ],
    denied: [
      (c) => c.dryRunDestination({ destination: { case: "destinationId", value: B_HOOK }, callJson: CALL }),
      (c) => c.dryRunDestination({ destination: { case: "destinationId", value: SHARED }, callJson: CALL }),
      (c) => c.dryRunDestination(draft([B])),
    ],
  },
  sendTestCall: {
    writes: [
      async (c) =>
        expect((await c.sendTestCall({ destinationId: A_HOOK })).attempts.at(-1)?.status).toBe(200),
    ],
    denied: [
      (c) => c.sendTestCall({ destinationId: B_HOOK }),
      (c) => c.sendTestCall({ destinationId: SHARED }),
    ],
  },

  createPortalLink: {
    denied: [(c) => c.createPortalLink({ sourceId: A }), (c) => c.createPortalLink({ sourceId: B })],
  },
  listPortalLinks: {
    denied: [(c) => c.listPortalLinks({ sourceId: A }), (c) => c.listPortalLinks({ sourceId: B })],
  },
  revokePortalLink: {
    denied: [(c) => c.revokePortalLink({ id: linkB }), (c) => c.revokePortalLink({ id: linkA })],
  },
  getCaller: {
    reads: [
      async (c) => {
        const me = await c.getCaller({});
        expect(me.actorKind).toBe(ActorKind.PORTAL_LINK);
        expect(me.portalLink?.sourceId).toBe(A);
      },
    ],
    denied: [],
  },
};

const METHODS = AdminService.methods.map((m) => m.localName).sort();

describe("the portal scope table", () => {
  it("has a rule for every method of the AdminService descriptor, and no other", () => {
    expect(Object.keys(PORTAL_SCOPE).sort()).toEqual(METHODS);
  });

  it("this test has a row for every method of the descriptor, and no other", () => {
    expect(Object.keys(ROWS).sort()).toEqual(METHODS);
  });

  it("refuses to portal links a method without a rule (a new RPC cannot escape the check)", async () => {
    const link = { id: "pl_0000000000000000", readOnly: false } as never;
    const source = { id: A } as never;
    const scope = new Scope({ link, source }, undefined as never);
    let ran = false;
    const run = async () => {
      ran = true;
      return {};
    };
    const err = await codeOf(inPortalScope("exportEverything", false, {}, scope, run, {}));
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(ran).toBe(false);
  });
});

for (const transport of ["gRPC", "Connect"] as const) {
  describe(`a portal link for source A, over ${transport}`, () => {
    const client = (token: string): Admin =>
      transport === "gRPC" ? grpcAdmin(world.stack, token) : connectAdmin(world.stack, token);

    it.each(METHODS)(
      "%s: allowed on A's world, PERMISSION_DENIED on B's and on anything global",
      async (method) => {
        const row = ROWS[method]!;
        const c = client(tokenA);
        for (const call of [...(row.reads ?? []), ...(row.writes ?? [])]) await call(c);
        for (const call of row.denied) {
          const err = await codeOf(call(c));
          expect(err?.code, `${method}: ${call.toString()}`).toBe(Code.PermissionDenied);
        }
      },
    );

    it.each(METHODS)(
      "%s with a read-only link: reads allowed, every write PERMISSION_DENIED",
      async (method) => {
        const row = ROWS[method]!;
        const c = client(tokenAReadOnly);
        for (const call of row.reads ?? []) await call(c);
        for (const call of [...(row.writes ?? []), ...row.denied]) {
          const err = await codeOf(call(c));
          expect(err?.code, `${method}: ${call.toString()}`).toBe(Code.PermissionDenied);
        }
      },
    );
  });
}

describe("a link that no longer works", () => {
  let revoked: string;
  let expired: string;
  beforeAll(async () => {
    const r = await world.stack.admin.createPortalLink({ sourceId: A });
    await world.stack.admin.revokePortalLink({ id: r.portalLink!.id });
    revoked = r.token;
    expired = await storeExpiredLink(world.stack.nc, world.stack.admin, A);
  });

  it.each(METHODS)(
    "%s: a revoked or expired link is UNAUTHENTICATED, whatever the request",
    async (method) => {
      for (const [token, why] of [
        [revoked, "revoked"],
        [expired, "expired"],
      ] as const) {
        const c = grpcAdmin(world.stack, token) as unknown as Record<
          string,
          (req: object) => Promise<unknown>
        >;
        const err = await codeOf(c[method]!({}));
        expect(err?.code, `${method} with a ${why} link`).toBe(Code.Unauthenticated);
        expect(err?.message).toContain(why);
      }
    },
  );
});

describe("what a portal link leaves in the audit log", () => {
  it("names the link (never its token) as who made a write, refused ones included", async () => {
    const c = grpcAdmin(world.stack, tokenA);
    await c.updateDestination({
      destination: { id: A_HOOK, name: "Renamed by A" },
      updateMask: { paths: ["name"] },
    });
    await codeOf(
      c.updateDestination({ destination: { id: B_HOOK, name: "x" }, updateMask: { paths: ["name"] } }),
    );
    const records = await until(
      async () => {
        const r = (await world.stack.admin.listAuditRecords({})).records;
        return r.some((x) => x.resourceId === B_HOOK && x.actorKind === ActorKind.PORTAL_LINK)
          ? r
          : undefined;
      },
      { message: "the refused write recorded" },
    );
    const renamed = records.find(
      (r) => r.action === "UpdateDestination" && r.requestJson.includes("Renamed by A"),
    );
    expect(renamed?.actorKind).toBe(ActorKind.PORTAL_LINK);
    expect(renamed?.actorId).toBe(linkA);
    expect(renamed?.outcome).toBe(AuditOutcome.SUCCEEDED);
    const refused = records.find((r) => r.resourceId === B_HOOK && r.actorKind === ActorKind.PORTAL_LINK);
    expect(refused?.actorId).toBe(linkA);
    expect(refused?.outcome).toBe(AuditOutcome.FAILED);
    expect(refused?.error).toMatch(/^PERMISSION_DENIED/);
    const all = JSON.stringify(records, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    for (const token of [tokenA, tokenAReadOnly]) expect(all).not.toContain(token.split(".").at(-1));
    c.close?.();
  });
});
