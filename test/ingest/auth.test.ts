import { Writable } from "node:stream";
import { startIngest } from "@hookpost/api";
import { adminMetadata, createClient, writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import {
  ADMIN_TOKEN,
  adminClient,
  failure,
  ingestClient,
  silentLogger,
  testConfig,
  useHarness,
} from "./harness.js";

const h = useHarness();

const track = { userId: "u1", event: "Signed Up" };

describe("write key authentication", () => {
  it("refuses a call without authorization", async () => {
    const err = await failure(h.client().track(track));
    expect(err.code).toBe(Code.UNAUTHENTICATED);
    expect(err.message).toContain("missing authorization");
    expect(err.message).toContain("Basic base64(<write key>:)");
  });

  it("refuses the wrong scheme, bad base64, an empty key and an unknown key", async () => {
    const { writeKey } = await h.source();
    const cases: [Record<string, string>, string][] = [
      [{ authorization: `Bearer ${writeKey}` }, "calls authenticate with a source write key"],
      [{ authorization: "Basic" }, "malformed authorization"],
      [{ authorization: "Basic !!!not-base64!!!" }, "not valid base64"],
      [{ authorization: `Basic ${Buffer.from(":").toString("base64")}` }, "the write key is empty"],
      [writeKeyMetadata("hpk_unknown_key_000000000000000000"), "unknown write key"],
    ];
    for (const [metadata, text] of cases) {
      const err = await failure(h.client(metadata).track(track));
      expect(err.code, text).toBe(Code.UNAUTHENTICATED);
      expect(err.message).toContain(text);
      expect(err.message).not.toContain(writeKey);
    }
  });

  it("the admin token is not a write key", async () => {
    const err = await failure(h.client(adminMetadata(ADMIN_TOKEN)).track(track));
    expect(err.code).toBe(Code.UNAUTHENTICATED);
  });

  it("authenticates every call RPC, including Batch and the streaming ones", async () => {
    const c = h.client();
    const calls = [
      () => c.identify({ userId: "u" }),
      () => c.page({ userId: "u" }),
      () => c.screen({ userId: "u" }),
      () => c.group({ userId: "u", groupId: "g" }),
      () => c.alias({ userId: "u", previousId: "p" }),
      () => c.batch({ calls: [] }),
      () => c.syncAudience([{ audienceName: "x" }]),
      () => c.syncComputedTrait([{ traitName: "x" }]),
    ];
    for (const send of calls) expect((await failure(send())).code).toBe(Code.UNAUTHENTICATED);
  });

  it("a just-created key works at once; accepts `Basic base64(key)` without the colon too", async () => {
    const { writeKey, client } = await h.source();
    expect((await client.track(track)).messageId).not.toBe("");
    const noColon = h.client({ authorization: `basic ${Buffer.from(writeKey).toString("base64")}` });
    expect((await noColon.track(track)).messageId).not.toBe("");
  });

  it("a rotated key fails at once and the new one works", async () => {
    const { id, writeKey, client } = await h.source();
    await client.track(track);
    const rotated = await h.admin.rotateWriteKey({ id });
    expect(rotated.writeKey).not.toBe(writeKey);
    expect(rotated.source!.writeKeyPrefix).toBe(rotated.writeKey.slice(0, 8));
    const err = await failure(client.track(track));
    expect(err.code).toBe(Code.UNAUTHENTICATED);
    expect(err.message).toContain("unknown write key");
    await h.client(writeKeyMetadata(rotated.writeKey)).track(track);
  });

  it("a deleted source's key fails at once", async () => {
    const { id, client } = await h.source();
    await h.admin.deleteSource({ id });
    expect((await failure(client.track(track))).code).toBe(Code.UNAUTHENTICATED);
  });

  it("a key just used (so remembered as accepted) fails at once after a deletion, also in a Batch", async () => {
    const { id, client } = await h.source();
    await client.track(track);
    await client.batch({ calls: [{ call: { case: "track", value: track } }] });
    await h.admin.deleteSource({ id });
    expect((await failure(client.track(track))).code).toBe(Code.UNAUTHENTICATED);
    const err = await failure(client.batch({ calls: [{ call: { case: "track", value: track } }] }));
    expect(err.code).toBe(Code.UNAUTHENTICATED);
  });

  it("another ingest replica sees a new key, a rotation and a deletion within 2 s", async () => {
    const replica = await startIngest(testConfig(h.nats.url), { logger: silentLogger() });
    try {
      const { id, writeKey } = await h.source("replicated");
      const viaReplica = ingestClient(replica.address, writeKeyMetadata(writeKey));
      h.clients.push(viaReplica);
      const within2s = { timeout: 2_000 };
      await until(() => viaReplica.track(track).then(() => true), {
        ...within2s,
        message: "the new key accepted",
      });
      const rotated = await h.admin.rotateWriteKey({ id });
      await until(async () => (await failure(viaReplica.track(track))).code === Code.UNAUTHENTICATED, {
        ...within2s,
        message: "the rotated-out key refused",
      });
      const rotatedClient = ingestClient(replica.address, writeKeyMetadata(rotated.writeKey));
      h.clients.push(rotatedClient);
      await until(() => rotatedClient.track(track).then(() => true), {
        ...within2s,
        message: "the rotated key accepted",
      });
      await h.admin.deleteSource({ id });
      await until(async () => (await failure(rotatedClient.track(track))).code === Code.UNAUTHENTICATED, {
        ...within2s,
        message: "the deleted source's key refused",
      });
    } finally {
      await replica.close();
    }
  });
});

describe("admin token authentication", () => {
  it("refuses admin calls without the token, with the wrong token or with a write key", async () => {
    const { writeKey } = await h.source();
    const clients = [
      adminClient(h.address, "wrong-token"),
      adminClient(h.address, `${ADMIN_TOKEN}x`),
      adminClient(h.address, ""),
    ];
    for (const c of clients) {
      h.clients.push(c);
      const err = await failure(c.listSources({}));
      expect(err.code).toBe(Code.UNAUTHENTICATED);
      expect(err.message).not.toContain(ADMIN_TOKEN);
    }
    const withWriteKey = createClient(AdminService, h.address, { metadata: writeKeyMetadata(writeKey) });
    h.clients.push(withWriteKey);
    const err = await failure(withWriteKey.createSource({ name: "x" }));
    expect(err.code).toBe(Code.UNAUTHENTICATED);
    expect(err.message).toContain("Bearer <admin token>");
    const none = createClient(AdminService, h.address);
    h.clients.push(none);
    for (const send of [
      () => none.getSource({ id: "x" }),
      () => none.deleteSource({ id: "x" }),
      () => none.rotateWriteKey({ id: "x" }),
      () => none.createDestination({}),
      () => none.getDestination({ id: "x" }),
      () => none.listDestinations({}),
      () => none.updateDestination({}),
      () => none.deleteDestination({ id: "x" }),
      () => none.listDeadLetters({}),
      () => none.replayDeadLetters({}),
    ]) {
      expect((await failure(send())).code).toBe(Code.UNAUTHENTICATED);
    }
  });

  it("Delete needs the admin token, not a write key", async () => {
    const { client } = await h.source();
    expect((await failure(client.delete({ userId: "u1" }))).code).toBe(Code.UNAUTHENTICATED);
    const admin = h.client(adminMetadata(ADMIN_TOKEN));
    // Authenticated: a user never seen is a successful deletion request notifying nobody.
    const r = await admin.delete({ userId: "never-seen-user" });
    expect(r.requestId).not.toBe("");
    expect(r.sourceIds).toEqual([]);
  });

  it("generates an admin token when ADMIN_TOKEN is unset and never logs it", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const { adminToken: _unset, ...rest } = testConfig(h.nats.url);
    const ingest = await startIngest(rest, { logger: pino({ level: "debug" }, sink) });
    try {
      expect(ingest.adminTokenGenerated).toBe(true);
      expect(ingest.adminToken.length).toBeGreaterThanOrEqual(32);
      const admin = adminClient(ingest.address, ingest.adminToken);
      h.clients.push(admin);
      const { writeKey } = await admin.createSource({ name: "logged?" });
      const c = ingestClient(ingest.address, writeKeyMetadata(writeKey));
      h.clients.push(c);
      await c.track(track);
      await failure(adminClient(ingest.address, "nope").listSources({}));
      const log = lines.join("");
      expect(log).toContain("generated a random admin token");
      expect(log).not.toContain(ingest.adminToken);
      expect(log).not.toContain(writeKey);
    } finally {
      await ingest.close();
    }
  });
});
