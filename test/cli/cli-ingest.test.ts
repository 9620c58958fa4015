import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { IngestHandle } from "@hookpost/api";
import type { StoredCall } from "@hookpost/contract";
import { EVENTS_STREAM } from "@hookpost/core";
import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestIngest } from "../helpers/ingest.js";
import { NatsServer } from "../helpers/nats-server.js";
import { createCrm, failed, hookpost, ok, runJson, useCliUser } from "./run-cli.js";

// End to end: the CLI as a real process against the real ingest on a real nats-server.
// (delete-user and dead-letters: test/cli/cli-admin.test.ts and cli-stack.test.ts.)

const TOKEN = "cli-e2e-admin-token-7c1d0e";
let nats: NatsServer;
let ingest: IngestHandle;
let nc: NatsConnection;

const user = useCliUser(() => ingest.address, TOKEN);

beforeAll(async () => {
  nats = await NatsServer.start();
  ingest = await startTestIngest(nats.url, TOKEN);
  nc = await connect({ servers: nats.url });
});

afterAll(async () => {
  await ingest?.close();
  await nc?.close();
  await nats?.stop();
});

async function stored(): Promise<StoredCall[]> {
  const jsm = await nc.jetstreamManager();
  const { state } = await jsm.streams.info(EVENTS_STREAM);
  const out: StoredCall[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    out.push((await jsm.streams.getMessage(EVENTS_STREAM, { seq })).json<StoredCall>());
  }
  return out;
}

const writeKeyOf = (stdout: string) => /hpk_\S+/.exec(stdout)?.[0] ?? "";

describe("hookpost against the real ingest", () => {
  it("manages sources: create (key shown once), list, get, rotate-key, delete", async () => {
    const created = ok(await user.run(["sources", "create", "Web app", "--id", "web"]));
    const key = writeKeyOf(created.stdout);
    expect(created.stdout).toContain("Write key (shown once, store it now):");
    expect(key).not.toBe("");

    const list = await runJson<{ id: string; writeKeyPrefix: string }[]>(user, ["sources", "list"]);
    expect(list).toContainEqual(expect.objectContaining({ id: "web", writeKeyPrefix: key.slice(0, 8) }));
    expect(ok(await user.run(["sources", "get", "web"])).stdout).toMatch(/^name:\s+Web app$/m);

    // the key works; after rotate-key only the new one does
    ok(await user.run(["send", "identify", "--write-key", key, "--user-id", "u-rot"]));
    const fresh = writeKeyOf(ok(await user.run(["sources", "rotate-key", "web"])).stdout);
    expect(fresh).not.toBe(key);
    const old = await user.run(["send", "identify", "--write-key", key, "--user-id", "u-rot"]);
    expect(old.code).toBe(1);
    expect(old.stderr).toContain("hint: check the write key");
    expect(old.stderr).not.toContain(key);
    ok(await user.run(["send", "identify", "--write-key", fresh, "--user-id", "u-rot"]));

    ok(await user.run(["sources", "create", "Temp", "--id", "temp"]));
    ok(await user.run(["sources", "delete", "temp"]));
    expect(failed(await user.run(["sources", "get", "temp"]), 1)).toMatch(/^error: .*temp/);
  });

  it("manages destinations; the server's field violations are readable", async () => {
    ok(await user.run(["sources", "create", "Shop", "--id", "shop"]));
    ok(
      await user.run(createCrm("shop", ["https://crm.example.com/hooks"], "--secret", "plain-secret-value")),
    );
    const got = await runJson(user, ["destinations", "get", "crm"]);
    expect(got).toMatchObject({
      id: "crm",
      sourceIds: ["shop"],
      urls: ["https://crm.example.com/hooks"],
      headers: { "X-Team": "growth" },
      sharedSecretSet: true,
      signing: "segment",
      enabled: true,
    });

    const updated = ok(await user.run(["destinations", "update", "crm", "--disable", "--name", "CRM v2"]));
    expect(updated.stdout).toContain("Updated destination crm: name changed; now disabled.");
    expect(updated.stdout).toMatch(/^enabled:\s+no$/m);
    const after = await runJson(user, ["destinations", "get", "crm"]);
    expect(after).toMatchObject({
      name: "CRM v2",
      enabled: false,
      sharedSecretSet: true,
      headers: { "X-Team": "growth" },
    });
    expect(ok(await user.run(["destinations", "list", "--source", "shop"])).stdout).toMatch(
      /^crm\s+CRM v2\s+no\s+shop\s/m,
    );

    expect(
      failed(
        await user.run([
          "destinations",
          "update",
          "crm",
          "--url",
          "ftp://files.example.com",
          "--url",
          "https://ok.example.com",
        ]),
        1,
      ),
    ).toMatch(/^error: invalid request\n {2}destination\.urls\[0\]: .+\n$/);

    expect(
      failed(await user.run(["destinations", "update", "crm", "--signing", "standard-webhooks"]), 1),
    ).toContain("destination.shared_secret:");

    ok(await user.run(["destinations", "delete", "crm"]));
    expect((await user.run(["destinations", "get", "crm"])).code).toBe(1);
  });

  it("apply creates, then a second apply leaves everything unchanged; an edit updates only that field", async () => {
    const yaml = `
sources:
  - { id: app, name: App }
  - { id: site, name: Site }
destinations:
  - id: warehouse
    name: Warehouse
    sources: [app, site]
    urls: [https://warehouse.example.com, https://warehouse-2.example.com/in]
    headers: { X-Env: prod }
    secretEnv: WAREHOUSE_SECRET
  - id: audit
    name: Audit
    sources: [app]
    urls: [https://audit.example.com/in]
    signing: standard-webhooks
    secretEnv: AUDIT_SECRET
    enabled: false
`;
    const secrets = {
      WAREHOUSE_SECRET: "wh-secret-1",
      AUDIT_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    };
    const path = join(user.dir, "hookpost.yaml");
    await writeFile(path, yaml);

    const first = ok(await user.run(["apply", "-f", path], secrets));
    expect(first.stdout).toContain("Summary: 4 created, 0 updated, 0 unchanged.");
    expect(first.stdout).toMatch(/^ {4}app: hpk_\S+$/m);
    expect(first.stdout).toMatch(/^ {4}site: hpk_\S+$/m);
    expect(first.stdout).not.toContain("wh-secret-1");

    const second = ok(await user.run(["--json", "apply", "-f", path], secrets));
    const report = JSON.parse(second.stdout) as { summary: unknown; writeKeys: unknown };
    expect(report.summary).toEqual({ created: 0, updated: 0, unchanged: 4 });
    expect(report.writeKeys).toEqual({});

    await writeFile(path, yaml.replace("X-Env: prod", "X-Env: staging"));
    const third = ok(await user.run(["apply", "-f", path], secrets));
    expect(third.stdout).toContain("destination warehouse: updated (headers)");
    expect(third.stdout).toContain("Summary: 0 created, 1 updated, 3 unchanged.");
    const wh = JSON.parse(
      ok(await user.run(["--json", "destinations", "get", "warehouse"])).stdout,
    ) as Record<string, unknown>;
    expect(wh).toMatchObject({ headers: { "X-Env": "staging" }, sharedSecretSet: true });

    // an invalid file changes nothing
    const before = ok(await user.run(["--json", "destinations", "list"])).stdout;
    await writeFile(
      path,
      yaml.replace("https://audit.example.com/in", "audit.example.com").replace("id: site", "id: site2"),
    );
    expect(failed(await user.run(["apply", "-f", path], secrets), 1)).toContain("destinations[1].urls[0]:");
    expect(ok(await user.run(["--json", "destinations", "list"])).stdout).toBe(before);
    expect(ok(await user.run(["sources", "list"])).stdout).not.toContain("site2");
  });

  it("send stores the call with the source's write key; the server's validation is readable", async () => {
    const key = writeKeyOf(ok(await user.run(["sources", "create", "Mobile", "--id", "mobile"])).stdout);
    const track = ok(
      await user.run(
        [
          "--json",
          "send",
          "track",
          "--user-id",
          "u-42",
          "--event",
          "Order Completed",
          "--properties",
          '{"total":12.5}',
        ],
        {
          HOOKPOST_WRITE_KEY: key,
        },
      ),
    );
    const { messageId } = JSON.parse(track.stdout) as { messageId: string };
    const call = (await stored()).find((c) => c.messageId === messageId);
    expect(call).toMatchObject({
      type: "track",
      sourceId: "mobile",
      userId: "u-42",
      event: "Order Completed",
      properties: { total: 12.5 },
    });

    const invalid = await user.run(["send", "track", "--write-key", key, "--user-id", "u-42"]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^error: invalid request\n {2}--event: a track call needs an event name/);
  });

  it("a wrong admin token is refused with a hint, and never printed", async () => {
    const r = await hookpost(["sources", "list"], { ...user.env, ADMIN_TOKEN: "not-the-right-token" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("hint: check the admin token");
    expect(r.stdout + r.stderr).not.toContain("not-the-right-token");
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
  });
});
