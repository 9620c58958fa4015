import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Client, ConnectError, createClient as createConnectClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { IngestConfig } from "@hookpost/api";
import { adminMetadata, createClient } from "@hookpost/client";
import { HookpostError } from "@hookpost/contract";
import { AdminService, type GetSourceResponse } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { hashPortalToken, newPortalLinkId, newPortalToken, PortalLinkStore } from "@hookpost/core";
import type { NatsConnection } from "nats";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { ingestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/**
 * Two tenants on one real stack (nats-server, ingest with its HTTP listener, a dispatcher, a
 * recording receiver): source A with its own destination and one shared with B, source B with its
 * own. Every destination first answers 400, so each source's call becomes a dead letter; then the
 * receiver answers 200 (test calls and replays are delivered).
 */
export const A = "tenant-a";
export const B = "tenant-b";
/** Destinations: A's alone, B's alone, and one connected to both. */
export const A_HOOK = "a-hook";
export const B_HOOK = "b-hook";
export const SHARED = "shared-hook";

export type Admin = Client<typeof AdminService>;

export interface World {
  stack: Stack;
  /** One message id per source (each dead-lettered on its destinations). */
  messages: { a: string; b: string };
  /** A deletion request id (GetDeletion), made by the admin. */
  deletionId: string;
  close(): Promise<void>;
}

export async function startWorld(ingest: Partial<IngestConfig> = {}): Promise<World> {
  const stack = await Stack.start({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0", ...ingest } });
  try {
    await stack.admin.createSource({ id: A, name: "Tenant A" });
    await stack.admin.createSource({ id: B, name: "Tenant B" });
    const a = await stack.admin.rotateWriteKey({ id: A });
    const b = await stack.admin.rotateWriteKey({ id: B });
    stack.receiver.respond = () => ({ status: 400, body: "refused" });
    await stack.destination({
      id: A_HOOK,
      name: "A's hook",
      sourceIds: [A],
      urls: [stack.receiver.url("/a")],
    });
    await stack.destination({
      id: B_HOOK,
      name: "B's hook",
      sourceIds: [B],
      urls: [stack.receiver.url("/b")],
    });
    await stack.destination({
      id: SHARED,
      name: "Shared hook",
      sourceIds: [A, B],
      urls: [stack.receiver.url("/shared")],
    });
    const clientA = ingestClient(stack.ingest.address, a.writeKey);
    const clientB = ingestClient(stack.ingest.address, b.writeKey);
    const mA = (await clientA.track({ userId: "user-a", event: "A happened" })).messageId;
    const mB = (await clientB.track({ userId: "user-b", event: "B happened" })).messageId;
    clientA.close();
    clientB.close();
    // Four dead letters: A's call on a-hook and ab-hook, B's on b-hook and ab-hook.
    await until(async () => (await stack.admin.listDeadLetters({})).deadLetters.length === 4, {
      timeout: 30_000,
      message: "four dead letters",
    });
    stack.receiver.respond = () => ({ status: 200 });
    const ingestAdmin = createClient(IngestService, stack.ingest.address, {
      metadata: adminMetadata(STACK_ADMIN_TOKEN),
    });
    const deletionId = (await ingestAdmin.delete({ userId: "user-nobody" })).requestId;
    ingestAdmin.close();
    return { stack, messages: { a: mA, b: mB }, deletionId, close: () => stack.close() };
  } catch (err) {
    await stack.close();
    throw err;
  }
}

/** AdminService over gRPC (INGEST_ADDR) with a bearer token. */
export function grpcAdmin(stack: Stack, token: string): Admin & { close(): void } {
  return createClient(AdminService, stack.ingest.address, {
    metadata: adminMetadata(token),
  }) as unknown as Admin & { close(): void };
}

/** AdminService over the Connect protocol (HTTP_ADDR), as the console calls it. */
export function connectAdmin(stack: Stack, token: string): Admin {
  return createConnectClient(
    AdminService,
    createConnectTransport({
      baseUrl: `http://${stack.ingest.httpAddress}`,
      httpVersion: "1.1",
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${token}`);
          return next(req);
        },
      ],
    }),
  );
}

/** The gRPC status code a call failed with (both transports number codes alike); undefined when it succeeded. */
export async function codeOf(p: Promise<unknown>): Promise<{ code: number; message: string } | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    if (err instanceof HookpostError) return { code: err.code, message: err.message };
    if (err instanceof ConnectError) return { code: err.code, message: err.rawMessage };
    throw err;
  }
}

/**
 * A link whose expiry has passed, as the bucket holds one (a real token and its record): no test
 * waits a minute for the shortest lifetime to pass. Returns its token.
 */
export async function storeExpiredLink(
  nc: NatsConnection,
  admin: { getSource(req: { id: string }): Promise<GetSourceResponse> },
  sourceId: string,
): Promise<string> {
  const store = await PortalLinkStore.open(nc);
  const source = (await admin.getSource({ id: sourceId })).source!;
  const id = newPortalLinkId();
  const token = newPortalToken(sourceId, id);
  await store.create({
    id,
    sourceId,
    sourceCreatedAt: timestampDate(source.createTime!).toISOString(),
    name: "",
    readOnly: false,
    createdAt: new Date(Date.now() - 7_200_000).toISOString(),
    expiresAt: new Date(Date.now() - 60_000).toISOString(),
    createdBy: "test",
    tokenHash: hashPortalToken(token),
  });
  return token;
}
