import { randomBytes } from "node:crypto";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { audited, tokenFingerprint } from "@hookpost/api";
import { Code } from "@hookpost/contract";
import {
  ActorKind,
  AdminService,
  AuditOutcome,
  type AuditRecord,
  Signing,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  AUDIT_STREAM,
  type AuditStoredRecord,
  type CallContext,
  DEFAULT_TOPOLOGY,
  ensureTopology,
  REDACTED,
} from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { ADMIN_TOKEN, failure, useHarness } from "./harness.js";

// The audit log of admin writes, against a real ingest and nats-server: every write leaves a
// record with who, what (before → after) and when; secrets, keys and header values never reach
// the stream; the records cannot be changed; a write the log cannot record is not made.

const h = useHarness();

const marker = (what: string) => `${what}-${randomBytes(6).toString("hex")}`;

/** Every record of the log, newest first, page after page. */
async function allRecords(resourceId = "", pageSize = 0): Promise<AuditRecord[]> {
  const out: AuditRecord[] = [];
  let pageToken = "";
  do {
    const page = await h.admin.listAuditRecords({ resourceId, pageSize, pageToken });
    out.push(...page.records);
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return out;
}

/** The raw bytes of every message on the AUDIT stream, subjects and headers included. */
async function rawStream(): Promise<string> {
  const { state } = await h.jsm.streams.info(AUDIT_STREAM);
  const parts: string[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const m = await h.jsm.streams.getMessage(AUDIT_STREAM, { seq });
    parts.push(
      m.subject,
      JSON.stringify([...(m.header ?? new Map())]),
      Buffer.from(m.data).toString("latin1"),
    );
  }
  return parts.join("\n");
}

const parsed = (json: string) => (json === "" ? undefined : (JSON.parse(json) as Record<string, unknown>));

describe("the audit log", () => {
  // Values that must never reach the log, collected as the story goes.
  const secrets: string[] = [ADMIN_TOKEN];

  it("records every admin write with who, what (before → after) and when", async () => {
    const started = Date.now();
    const created = await h.admin.createSource({ name: "Shop", id: "shop" });
    const rotated = await h.admin.rotateWriteKey({ id: "shop" });
    secrets.push(created.writeKey, rotated.writeKey);

    const secret = marker("shared-secret");
    const headerValue = marker("header-value");
    const dest = await h.admin.createDestination({
      destination: {
        id: "crm",
        name: "CRM",
        sourceIds: ["shop"],
        urls: ["https://crm.example.com/in"],
        headers: { "X-Api-Key": headerValue },
        sharedSecret: secret,
        signing: Signing.SEGMENT,
      },
    });
    const newSecret = marker("updated-secret");
    const newHeaderValue = marker("updated-header");
    const updated = await h.admin.updateDestination({
      destination: {
        id: "crm",
        urls: ["https://exfiltrate.example.net/in"],
        headers: { "X-Api-Key": newHeaderValue, "X-Team": "growth" },
        sharedSecret: newSecret,
      },
      updateMask: { paths: ["urls", "headers", "shared_secret"] },
    });
    // Pause and resume.
    await h.admin.updateDestination({
      destination: { id: "crm", enabled: false },
      updateMask: { paths: ["enabled"] },
    });
    await h.admin.updateDestination({
      destination: { id: "crm", enabled: true },
      updateMask: { paths: ["enabled"] },
    });
    const rotatedSecret = await h.admin.rotateSecret({ destinationId: "crm" });
    const givenSecret = marker("given-secret");
    await h.admin.rotateSecret({ destinationId: "crm", newSecret: givenSecret });
    secrets.push(secret, headerValue, newSecret, newHeaderValue, rotatedSecret.secret, givenSecret);
    const replay = await h.admin.replayDeadLetters({ destinationId: "crm" });
    // Refused: recorded too, with the error.
    const refused = await failure(h.admin.createSource({ name: "", id: "nameless" }));
    expect(refused.code).toBe(Code.INVALID_ARGUMENT);
    const deleted = await h.admin.deleteSource({ id: "shop" });
    await h.admin.deleteDestination({ id: "crm" });

    const records = await allRecords();
    // The destination's own writes, newest first.
    const crmWrites = [
      "ReplayDeadLetters",
      "RotateSecret",
      "RotateSecret",
      "UpdateDestination",
      "UpdateDestination",
      "UpdateDestination",
      "CreateDestination",
    ];
    // Newest first, one per call.
    expect(records.map((r) => r.action)).toEqual([
      "DeleteDestination",
      "DeleteSource",
      "CreateSource",
      ...crmWrites,
      "RotateWriteKey",
      "CreateSource",
    ]);
    for (const r of records) {
      // Who: the admin token by its fingerprint, never the token.
      expect(r.actorKind).toBe(ActorKind.ADMIN_TOKEN);
      expect(r.actorId).toBe(tokenFingerprint(ADMIN_TOKEN));
      expect(r.actorId).toMatch(/^[0-9a-f]{8}$/);
      // When.
      const at = timestampDate(r.time!).getTime();
      expect(at).toBeGreaterThanOrEqual(started - 1000);
      expect(at).toBeLessThanOrEqual(Date.now());
      expect(timestampDate(r.outcomeTime!).getTime()).toBeGreaterThanOrEqual(at);
      expect(r.id).toMatch(/^[0-9a-f]{20}$/);
    }
    const [
      delDest,
      delSource,
      nameless,
      replayed,
      given,
      generated,
      resumed,
      paused,
      update,
      createDest,
      rotate,
      createSource,
    ] = records;

    expect(createSource).toMatchObject({
      resourceType: "source",
      resourceId: "shop",
      outcome: AuditOutcome.SUCCEEDED,
      revision: created.revision,
    });
    expect(parsed(createSource!.changes[0]!.afterJson)).toMatchObject({
      id: "shop",
      name: "Shop",
      writeKeyHash: REDACTED,
      writeKeyPrefix: created.writeKey.slice(0, 8),
    });
    expect(parsed(createSource!.resultJson)).toEqual({ writeKey: REDACTED });
    expect(rotate!.changes[0]!.changedFields).toEqual(["writeKeyHash", "writeKeyPrefix"]);
    expect(rotate!.revision).toBe(rotated.revision);

    expect(createDest).toMatchObject({
      resourceType: "destination",
      resourceId: "crm",
      revision: dest.revision,
    });
    expect(createDest!.changes[0]!.beforeJson).toBe("");
    expect(parsed(createDest!.changes[0]!.afterJson)).toMatchObject({
      urls: ["https://crm.example.com/in"],
      headers: { "X-Api-Key": REDACTED },
      sharedSecret: REDACTED,
    });

    // What changed: the URL, in clear; the secret and header values, by name only.
    expect(update).toMatchObject({ outcome: AuditOutcome.SUCCEEDED, revision: updated.revision });
    const change = update!.changes[0]!;
    expect(change).toMatchObject({ resourceType: "destination", resourceId: "crm" });
    expect(change.changedFields).toEqual(["headers", "sharedSecret", "urls"]);
    expect(parsed(change.beforeJson)).toMatchObject({ urls: ["https://crm.example.com/in"] });
    expect(parsed(change.afterJson)).toMatchObject({
      urls: ["https://exfiltrate.example.net/in"],
      headers: { "X-Api-Key": REDACTED, "X-Team": REDACTED },
    });
    expect(parsed(update!.requestJson)).toMatchObject({
      destination: { id: "crm", sharedSecret: REDACTED, urls: ["https://exfiltrate.example.net/in"] },
      updateMask: { paths: ["urls", "headers", "shared_secret"] },
    });

    expect(paused!.changes[0]!.changedFields).toEqual(["enabled"]);
    expect(parsed(paused!.changes[0]!.afterJson)).toMatchObject({ enabled: false });
    expect(parsed(resumed!.changes[0]!.afterJson)).toMatchObject({ enabled: true });
    for (const r of [generated!, given!]) {
      expect(r.changes[0]!.changedFields).toEqual(
        expect.arrayContaining(["previousSecret", "previousSecretExpiresAt", "sharedSecret"]),
      );
      expect(parsed(r.resultJson)).toEqual({ secret: REDACTED });
    }
    expect(parsed(given!.requestJson)).toMatchObject({ destinationId: "crm", newSecret: REDACTED });
    expect(replayed).toMatchObject({ resourceId: "crm", outcome: AuditOutcome.SUCCEEDED, revision: 0n });
    expect(parsed(replayed!.resultJson)).toEqual({ replayed: replay.replayed });

    expect(nameless).toMatchObject({
      action: "CreateSource",
      resourceId: "nameless",
      outcome: AuditOutcome.FAILED,
    });
    expect(nameless!.error).toMatch(/^INVALID_ARGUMENT: .*name/);

    // Deleting the source disconnected the destination: both changes are in its record.
    expect(delSource).toMatchObject({ resourceId: "shop", revision: deleted.revision });
    expect(delSource!.changes.map((c) => [c.resourceType, c.resourceId, c.afterJson === ""])).toEqual([
      ["source", "shop", true],
      ["destination", "crm", false],
    ]);
    expect(parsed(delSource!.changes[1]!.afterJson)).toMatchObject({ sourceIds: [] });
    expect(parsed(delDest!.changes[0]!.beforeJson)).toMatchObject({ id: "crm" });
    expect(delDest!.changes[0]!.afterJson).toBe("");

    // By resource: the destination's story includes the source deletion that disconnected it.
    const crm = await allRecords("crm");
    expect(crm.map((r) => r.action)).toEqual(["DeleteDestination", "DeleteSource", ...crmWrites]);
    // Pages of one hold the same records.
    expect((await allRecords("", 1)).map((r) => r.id)).toEqual(records.map((r) => r.id));
  });

  it("records every write of AdminService, including ones added later", async () => {
    // The same rule as admin-service.ts READ: a dry run changes nothing.
    const writes = AdminService.methods.filter((m) => !/^(Get|List|Search|DryRun)[A-Z]/.test(m.name));
    expect(writes.length).toBeGreaterThanOrEqual(8);
    const client = h.admin as unknown as Record<string, (req: object) => Promise<unknown>>;
    for (const m of writes) await client[m.localName]!({}).catch(() => undefined);
    const recent = (await h.admin.listAuditRecords({ pageSize: writes.length })).records;
    expect(recent.map((r) => r.action).sort()).toEqual(writes.map((m) => m.name).sort());
    for (const r of recent) expect(r.outcome).not.toBe(AuditOutcome.UNKNOWN);
    // Reads leave no record.
    await h.admin.listSources({});
    await h.admin.listAuditRecords({});
    expect((await h.admin.listAuditRecords({ pageSize: 1 })).records[0]!.id).toBe(recent[0]!.id);
  });

  it("hides a malformed header name, which may hold its value, in the request and the error", async () => {
    const value = marker("colon-forgotten");
    const err = await failure(
      h.admin.createDestination({
        destination: {
          name: "Typo",
          urls: ["https://typo.example.com/in"],
          headers: { [`Authorization Bearer ${value}`]: "" },
        },
      }),
    );
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.message).toContain(value);
    secrets.push(value);
    const [r] = (await h.admin.listAuditRecords({ pageSize: 1 })).records;
    expect(r).toMatchObject({ action: "CreateDestination", outcome: AuditOutcome.FAILED });
    expect(r!.error).toMatch(/^INVALID_ARGUMENT: .*destination\.headers\["\[invalid name\]"\]/);
    expect(parsed(r!.requestJson)).toMatchObject({
      destination: { headers: { "[invalid name] 1": REDACTED } },
    });
  });

  it("masks a URL's password and fragment in a refused request (both can carry a credential)", async () => {
    const password = marker("url-password");
    const fragment = marker("url-fragment");
    const err = await failure(
      h.admin.createDestination({
        destination: { name: "Creds", urls: [`https://bot:${password}@creds.example.com/in#${fragment}`] },
      }),
    );
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    secrets.push(password, fragment);
    const [r] = (await h.admin.listAuditRecords({ pageSize: 1 })).records;
    expect(r).toMatchObject({ action: "CreateDestination", outcome: AuditOutcome.FAILED });
    expect(parsed(r!.requestJson)).toMatchObject({
      destination: { urls: ["https://bot:***@creds.example.com/in#[redacted]"] },
    });
  });

  it("never stores a secret, key, header value or the admin token", async () => {
    const raw = await rawStream();
    expect(raw).toContain("exfiltrate.example.net");
    expect(secrets.length).toBeGreaterThanOrEqual(9);
    for (const s of secrets) expect(raw).not.toContain(s);
    const listed = JSON.stringify(await allRecords(), (_k, v) => (typeof v === "bigint" ? String(v) : v));
    for (const s of secrets) expect(listed).not.toContain(s);
  });

  it("cannot be edited: no RPC changes a record, and the stream refuses deletes and purges", async () => {
    expect(AdminService.methods.filter((m) => /audit/i.test(m.name)).map((m) => m.name)).toEqual([
      "ListAuditRecords",
    ]);
    const before = await rawStream();
    const { state, config } = await h.jsm.streams.info(AUDIT_STREAM);
    expect(config).toMatchObject({ deny_delete: true, deny_purge: true });
    await expect(h.jsm.streams.deleteMessage(AUDIT_STREAM, state.first_seq)).rejects.toThrow(/not permitted/);
    await expect(h.jsm.streams.purge(AUDIT_STREAM)).rejects.toThrow(/not permitted/);
    await expect(h.jsm.streams.update(AUDIT_STREAM, { ...config, deny_delete: false })).rejects.toThrow(
      /deny message deletes/,
    );
    // A restart's topology check keeps it so.
    await ensureTopology(h.jsm, DEFAULT_TOPOLOGY);
    expect((await h.jsm.streams.info(AUDIT_STREAM)).config).toMatchObject({
      deny_delete: true,
      deny_purge: true,
    });
    expect(await rawStream()).toBe(before);
  });

  it("refuses a write it cannot record, and changes nothing", async () => {
    const { config, state } = await h.jsm.streams.info(AUDIT_STREAM);
    // Full: not one more request record fits.
    await h.jsm.streams.update(AUDIT_STREAM, { ...config, max_bytes: state.bytes + 16 });
    try {
      const err = await failure(h.admin.createSource({ name: "Unrecorded", id: "unrecorded" }));
      expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
      expect(err.message).toContain("audit log is full");
      expect(err.message).toContain("nothing was changed");
      expect((await failure(h.admin.getSource({ id: "unrecorded" }))).code).toBe(Code.NOT_FOUND);
      expect((await h.jsm.streams.info(AUDIT_STREAM)).state.last_seq).toBe(state.last_seq);
    } finally {
      await h.jsm.streams.update(AUDIT_STREAM, config);
    }
    await h.admin.createSource({ name: "Recorded", id: "recorded" });
    expect((await h.admin.listAuditRecords({ pageSize: 1 })).records[0]).toMatchObject({
      resourceId: "recorded",
      outcome: AuditOutcome.SUCCEEDED,
    });
  });
});

describe("an outcome that cannot be stored", () => {
  const ctx = {
    method: "m",
    metadata: undefined,
    peer: "",
    signal: new AbortController().signal,
  } as unknown as CallContext;
  const call = { action: "RotateSecret", actor: { kind: "admin" as const, id: "0badc0de" }, req: {}, ctx };

  it("keeps the answer (it may carry a secret shown once), retries, then counts and logs it", async () => {
    const stored: AuditStoredRecord[] = [];
    let outcomeTries = 0;
    let lost = 0;
    const answer = await audited(
      {
        auditLog: {
          append: async (r) => {
            if (r.kind === "outcome") {
              outcomeTries++;
              throw new Error("no responders");
            }
            stored.push(r);
            return stored.length;
          },
        },
        log: quietLogger,
        outcomeRetryMs: [1, 1],
        onOutcomeLost: () => lost++,
      },
      call,
      async () => ({ secret: "whsec_shown_once", revision: 7n }),
    );
    expect(answer).toEqual({ secret: "whsec_shown_once", revision: 7n });
    expect(outcomeTries).toBe(3);
    expect(lost).toBe(1);
    // The request record was stored before the change: the log lists the call (outcome unknown).
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ kind: "request", action: "RotateSecret" });
  });

  it("makes no change when the request record cannot be stored", async () => {
    let ran = false;
    const err = await failure(
      audited(
        {
          auditLog: {
            append: async () => {
              throw new Error("timeout");
            },
          },
          log: quietLogger,
        },
        call,
        async () => {
          ran = true;
        },
      ),
    );
    expect(ran).toBe(false);
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(err.message).toContain("nothing was changed");
  });
});
