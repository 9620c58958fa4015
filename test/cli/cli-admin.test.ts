import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { CONFIG_BUCKET, EVENTS_STREAM, kvStream } from "@hookpost/core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { stackWithStore } from "../helpers/stack-store.js";
import { until } from "../helpers/until.js";
import { createCrm, failed, hookpost, ok, runJson, useCliUser } from "./run-cli.js";

// The CLI as a real process against the real admin service: an ingest (api) with a dispatcher
// and a nats-server on loopback. What the server stored is read back from the configuration
// bucket (a ConfigStore of the test's own); what was sent, from the EVENTS stream and a receiver.

const user = useCliUser(() => t.stack.ingest.address, STACK_ADMIN_TOKEN);

const t = stackWithStore();

// Every test starts from an empty configuration.
beforeEach(async () => {
  const { destinations } = await t.stack.admin.listDestinations({});
  for (const d of destinations) await t.stack.admin.deleteDestination({ id: d.id });
  const { sources } = await t.stack.admin.listSources({});
  for (const s of sources) await t.stack.admin.deleteSource({ id: s.id });
});

/** The configuration bucket's latest revision: unchanged means nothing was written. */
async function revision(): Promise<number> {
  return (await (await t.stack.nc.jetstreamManager()).streams.info(kvStream(CONFIG_BUCKET))).state.last_seq;
}

/** What the server stored for a destination, once the test's store caught up with the bucket. */
async function storedDestination(id: string) {
  const latest = await revision();
  await until(() => t.store.revision >= latest, { message: `the test's config store at revision ${latest}` });
  return t.store.destination(id);
}

/** Calls stored in EVENTS so far: unchanged means nothing was sent. */
async function eventsStored(): Promise<number> {
  return (await (await t.stack.nc.jetstreamManager()).streams.info(EVENTS_STREAM)).state.messages;
}

/** The write key a `sources create` (or apply) printed for source `id` (the only time it is shown). */
function writeKeyIn(stdout: string, id?: string): string {
  const m = id ? new RegExp(`${id}: (hpk_\\S+)`).exec(stdout) : /(hpk_\S+)/.exec(stdout);
  expect(m, stdout).not.toBeNull();
  return m![1]!;
}

/** `hookpost send track` of user "u", event "E", with this message id. */
const sendTrack = (key: string, messageId: string) => [
  "send",
  "track",
  "--write-key",
  key,
  "--user-id",
  "u",
  "--event",
  "E",
  "--message-id",
  messageId,
];

describe("sources", () => {
  it("create prints the write key once, clearly; list/get show only its prefix", async () => {
    const created = ok(await user.run(["sources", "create", "Web app", "--id", "web"]));
    const key = writeKeyIn(created.stdout);
    expect(t.store.sourceByWriteKey(key)?.id ?? (await until(() => t.store.sourceByWriteKey(key)))?.id).toBe(
      "web",
    );
    expect(created.stdout).toContain('Created source web ("Web app")');
    expect(created.stdout).toMatch(/Write key \(shown once, store it now\):\n\n {4}hpk_\S+\n/);
    expect(created.stdout).toContain(key);

    const list = ok(await user.run(["sources", "list"]));
    expect(list.stdout).toMatch(/^ID\s+NAME\s+KEY PREFIX\s+CREATED$/m);
    expect(list.stdout).toMatch(new RegExp(`^web\\s+Web app\\s+${key.slice(0, 8)}…\\s+\\d{4}-`, "m"));
    expect(list.stdout).not.toContain(key);

    const get = ok(await user.run(["sources", "get", "web"]));
    expect(get.stdout).toMatch(/^id:\s+web$/m);
    expect(get.stdout).toMatch(/^name:\s+Web app$/m);
    expect(get.stdout).not.toContain(key);
  });

  it("rotate-key prints the new key; delete removes the source", async () => {
    const old = writeKeyIn(ok(await user.run(["sources", "create", "App", "--id", "app"])).stdout);
    const rotated = ok(await user.run(["sources", "rotate-key", "app"]));
    const fresh = writeKeyIn(rotated.stdout);
    expect(fresh).not.toBe(old);
    // The server took the new key (and only it).
    await until(() => t.store.sourceByWriteKey(fresh), { message: "the rotated key stored" });
    expect(rotated.stdout).toContain("previous key no longer works");

    const deleted = ok(await user.run(["sources", "delete", "app"]));
    expect(deleted.stdout).toContain("Deleted source app.");
    expect(
      await t.stack.admin.getSource({ id: "app" }).then(
        () => "found",
        () => "gone",
      ),
    ).toBe("gone");
    expect(ok(await user.run(["sources", "list"])).stdout).toContain("No sources.");
  });

  it("--json prints parseable documents", async () => {
    const created = ok(await user.run(["--json", "sources", "create", "Web", "--id", "web"]));
    const body = JSON.parse(created.stdout) as { source: { id: string }; writeKey: string };
    expect(body.source.id).toBe("web");
    expect(body.writeKey).toMatch(/^hpk_/);
    expect(await until(() => t.store.sourceByWriteKey(body.writeKey))).toMatchObject({ id: "web" });
    // --json also works after the command name
    const list = JSON.parse(ok(await user.run(["sources", "list", "--json"])).stdout) as { id: string }[];
    expect(list.map((s) => s.id)).toEqual(["web"]);
  });

  it("allowed origins: set on create, shown by get, replaced or emptied by update (issue 29)", async () => {
    ok(
      await user.run([
        "sources",
        "create",
        "Shop",
        "--id",
        "shop",
        "--allowed-origin",
        "HTTPS://Shop.Example.com/",
        "--allowed-origin",
        "https://*.example.org",
      ]),
    );
    const get = ok(await user.run(["sources", "get", "shop"]));
    expect(get.stdout).toMatch(
      /^allowed origins:\s+https:\/\/shop\.example\.com, https:\/\/\*\.example\.org$/m,
    );
    const updated = ok(
      await user.run([
        "sources",
        "update",
        "shop",
        "--allowed-origin",
        "http://localhost:3000",
        "--name",
        "Web shop",
      ]),
    );
    expect(updated.stdout).toContain("Updated source shop.");
    expect(updated.stdout).toMatch(/^name:\s+Web shop$/m);
    expect((await t.stack.admin.getSource({ id: "shop" })).source).toMatchObject({
      name: "Web shop",
      allowedOrigins: ["http://localhost:3000"],
    });
    const any = JSON.parse(
      ok(await user.run(["--json", "sources", "update", "shop", "--any-origin"])).stdout,
    ) as {
      allowedOrigins: string[];
      name: string;
    };
    expect(any).toMatchObject({ allowedOrigins: [], name: "Web shop" });
    expect(ok(await user.run(["sources", "get", "shop"])).stdout).toMatch(/^allowed origins:\s+any$/m);
    expect(
      failed(await user.run(["sources", "update", "shop", "--allowed-origin", "shop.example.com"]), 1),
    ).toContain("source.allowed_origins[0]");
    expect((await user.run(["sources", "update", "shop"])).code).toBe(2);
  });

  it("a missing source is a readable error, exit 1", async () => {
    const r = await user.run(["sources", "get", "nope"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: source "nope" does not exist\n');
    expect(r.stdout).toBe("");
  });
});

describe("destinations", () => {
  beforeEach(async () => {
    ok(await user.run(["sources", "create", "Web", "--id", "web"]));
  });

  it("create, get, list, update (only the given fields), delete", async () => {
    const created = ok(
      await user.run(
        createCrm(
          "web",
          ["https://crm.example.com/a", "https://crm-backup.example.com/a"],
          "--secret-env",
          "CRM_SECRET",
        ),
        { CRM_SECRET: "s3cret-value" },
      ),
    );
    expect(created.stdout).toContain('Created destination crm ("CRM")');
    expect(created.stdout).not.toContain("s3cret-value");
    const stored = (await storedDestination("crm"))!;
    expect(stored.urls).toEqual(["https://crm.example.com/a", "https://crm-backup.example.com/a"]);
    expect(stored.headers).toEqual({ "X-Team": "growth" });
    expect(stored.sharedSecret).toBe("s3cret-value");
    expect(stored.enabled).toBe(true);

    const get = ok(await user.run(["destinations", "get", "crm"]));
    expect(get.stdout).toMatch(/^shared secret:\s+set$/m);
    expect(get.stdout).toMatch(/^ {2}1\. https:\/\/crm\.example\.com\/a$/m);
    expect(get.stdout).toMatch(/^ {2}X-Team: growth$/m);

    const list = ok(await user.run(["destinations", "list", "--source", "web"]));
    expect(list.stdout).toMatch(/^crm\s+CRM\s+yes\s+web\s+https:\/\/crm\.example\.com\/a https/m);
    expect(ok(await user.run(["destinations", "list", "--source", "other"])).stdout).toContain(
      "No destinations for source other.",
    );

    const updated = ok(
      await user.run(["destinations", "update", "crm", "--disable", "--url", "https://new.example.com/h"]),
    );
    expect(updated.stdout).toContain("Updated destination crm: urls changed; now disabled.");
    expect(updated.stdout).not.toContain("(enabled)");
    expect(updated.stdout).toMatch(/^enabled:\s+no$/m);
    const after = (await storedDestination("crm"))!;
    expect(after.enabled).toBe(false);
    expect(after.urls).toEqual(["https://new.example.com/h"]);
    expect(after.headers).toEqual({ "X-Team": "growth" }); // untouched
    expect(after.sharedSecret).toBe("s3cret-value"); // untouched

    ok(await user.run(["destinations", "update", "crm", "--clear-secret", "--enable"]));
    // (standard-webhooks with no secret is refused by the server: it signs with the secret)
    const cleared = (await storedDestination("crm"))!;
    expect(cleared.sharedSecret ?? "").toBe("");
    expect(cleared.enabled).toBe(true);
    expect(cleared.urls).toEqual(["https://new.example.com/h"]); // untouched
    expect(cleared.headers).toEqual({ "X-Team": "growth" }); // untouched

    const json = await runJson(user, ["destinations", "get", "crm"]);
    expect(json).toMatchObject({
      id: "crm",
      enabled: true,
      signing: "segment",
      sharedSecretSet: false,
    });

    ok(await user.run(["destinations", "delete", "crm"]));
    expect((await t.stack.admin.listDestinations({})).destinations).toEqual([]);
  });

  it("field violations from the server are listed one per line", async () => {
    const before = await revision();
    expect(
      failed(
        await user.run([
          "destinations",
          "create",
          "--name",
          "Bad",
          "--source",
          "web",
          "--url",
          "ftp://x",
          "--url",
          "https://ok.example.com",
        ]),
        1,
      ),
    ).toBe('error: invalid request\n  destination.urls[0]: scheme "ftp" is not allowed: use http or https\n');
    expect(await revision()).toBe(before);

    const refused = failed(
      await user.run([
        "--json",
        "destinations",
        "create",
        "--name",
        "Bad",
        "--source",
        "nope",
        "--url",
        "https://ok.example.com",
      ]),
      1,
    );
    expect(JSON.parse(refused)).toEqual({
      error: {
        code: "INVALID_ARGUMENT",
        message: "invalid request",
        fieldViolations: [
          { field: "destination.source_ids[0]", description: 'source "nope" does not exist' },
        ],
      },
    });
  });

  it("usage errors exit 2 and send nothing", async () => {
    const before = await revision();
    const createX = ["destinations", "create", "--name", "X", "--source", "web", "--url", "https://a"];
    const cases: [string[], RegExp][] = [
      [
        ["destinations", "create", "--name", "X", "--url", "https://a.example"],
        /required option '--source <id>'/,
      ],
      [[...createX, "--header", "nocolon"], /"Name: value"/],
      [[...createX, "--signing", "md5"], /Allowed choices are segment, standard-webhooks/],
      [[...createX, "--secret-env", "NOT_SET_ANYWHERE"], /environment variable NOT_SET_ANYWHERE is not set/],
      [["destinations", "update", "crm"], /nothing to change/],
      [["destinations", "update", "crm", "--enable", "--disable"], /cannot be used with/],
      [["destinations", "update", "crm", "--secret", "x", "--clear-secret"], /cannot be used with/],
      [["bogus"], /unknown command 'bogus'/],
      [["sources", "list", "--nope"], /unknown option '--nope'/],
    ];
    const results = await Promise.all(cases.map(([args]) => user.run(args)));
    cases.forEach(([args, message], i) => {
      expect(results[i]!.code, args.join(" ")).toBe(2);
      expect(results[i]!.stderr, args.join(" ")).toMatch(message);
    });
    expect(await revision()).toBe(before);
  });
});

describe("apply", () => {
  const yaml = `
sources:
  - id: web
    name: Web app
  - { id: mobile, name: Mobile }
destinations:
  - id: crm
    name: CRM
    sources: [web, mobile]
    urls: [https://crm.example.com/hooks]
    headers:
      X-Team: growth
    secretEnv: CRM_SECRET
  - id: audit
    name: Audit
    sources: [web]
    urls: [https://audit.example.com/in, https://audit-2.example.com/in]
    signing: standard-webhooks
    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    enabled: false
`;

  it("creates what is missing, then a second run changes nothing; edits update only what differs", async () => {
    const path = await user.file("hookpost.yaml", yaml);
    const first = ok(await user.run(["apply", "-f", path], { CRM_SECRET: "crm-secret-1" }));
    expect(first.stdout).toContain("source web: created");
    expect(first.stdout).toContain("destination audit: created");
    expect(first.stdout).toContain("Summary: 4 created, 0 updated, 0 unchanged.");
    for (const id of ["web", "mobile"]) {
      const key = writeKeyIn(first.stdout, id);
      expect(await until(() => t.store.sourceByWriteKey(key))).toMatchObject({ id });
    }
    expect(first.stdout).not.toContain("crm-secret-1");
    expect((await storedDestination("crm"))!.sharedSecret).toBe("crm-secret-1");
    expect((await storedDestination("audit"))!.enabled).toBe(false);

    const applied = await revision();
    const second = ok(await user.run(["apply", "-f", path], { CRM_SECRET: "crm-secret-1" }));
    expect(second.stdout).toContain("Summary: 0 created, 0 updated, 4 unchanged.");
    expect(second.stdout).not.toContain("Write keys");
    expect(second.stdout).not.toContain("hpk_");
    expect(second.stdout).toContain(
      "Shared secrets are write-only, so not compared: crm, audit kept the current one (--update-secrets sends the file's).",
    );
    expect(await revision()).toBe(applied);

    const edited = await user.file(
      "edited.yaml",
      yaml.replace("X-Team: growth", "X-Team: sales").replace("enabled: false", "enabled: true"),
    );
    const third = ok(await user.run(["--json", "apply", "-f", edited], { CRM_SECRET: "crm-secret-1" }));
    const report = JSON.parse(third.stdout) as {
      summary: unknown;
      results: { id: string; action: string; changes?: string[] }[];
    };
    expect(report.summary).toEqual({ created: 0, updated: 2, unchanged: 2 });
    expect(report.results.find((r) => r.id === "crm")).toMatchObject({
      action: "update",
      changes: ["headers"],
    });
    expect(report.results.find((r) => r.id === "audit")).toMatchObject({
      action: "update",
      changes: ["enabled"],
    });
    const crm = (await storedDestination("crm"))!;
    expect(crm.headers).toEqual({ "X-Team": "sales" });
    expect(crm.sharedSecret).toBe("crm-secret-1"); // untouched
    expect((await storedDestination("audit"))!.enabled).toBe(true);

    const secrets = ok(
      await user.run(["--json", "apply", "-f", edited, "--update-secrets"], { CRM_SECRET: "crm-secret-2" }),
    );
    const updates = (
      JSON.parse(secrets.stdout) as { results: { id: string; action: string; changes?: string[] }[] }
    ).results.filter((r) => r.action === "update");
    expect(updates.map((r) => [r.id, r.changes])).toEqual([
      ["crm", ["shared_secret"]],
      ["audit", ["shared_secret"]],
    ]);
    expect((await storedDestination("crm"))!.sharedSecret).toBe("crm-secret-2");
    expect((await storedDestination("crm"))!.headers).toEqual({ "X-Team": "sales" }); // untouched
  });

  it("sets, updates and renames a source's allowed origins; a re-apply changes nothing", async () => {
    const withOrigins = (origins: string, name = "Web app") =>
      `sources:\n  - { id: web, name: ${name}, allowedOrigins: ${origins} }\n`;
    const path = await user.file("origins.yaml", withOrigins("[HTTPS://Shop.Example.com/]"));
    expect(ok(await user.run(["apply", "-f", path])).stdout).toContain("source web: created");
    expect((await t.stack.admin.getSource({ id: "web" })).source!.allowedOrigins).toEqual([
      "https://shop.example.com",
    ]);
    const applied = await revision();
    expect(ok(await user.run(["apply", "-f", path])).stdout).toContain("source web: unchanged");
    expect(await revision()).toBe(applied);
    const edited = await user.file(
      "origins-2.yaml",
      withOrigins("[https://shop.example.com, http://localhost:3000]", "Web"),
    );
    const report = await runJson<{
      results: { id: string; action: string; changes?: string[] }[];
    }>(user, ["apply", "-f", edited]);
    expect(report.results).toEqual([
      { kind: "source", id: "web", action: "update", changes: ["name", "allowed_origins"] },
    ]);
    expect((await t.stack.admin.getSource({ id: "web" })).source).toMatchObject({
      name: "Web",
      allowedOrigins: ["https://shop.example.com", "http://localhost:3000"],
    });
    // Omitted: any origin again.
    ok(
      await user.run([
        "apply",
        "-f",
        await user.file("origins-3.yaml", "sources: [{ id: web, name: Web }]\n"),
      ]),
    );
    expect((await t.stack.admin.getSource({ id: "web" })).source!.allowedOrigins).toEqual([]);
  });

  it("--dry-run shows the plan and changes nothing; JSON files work too", async () => {
    const path = await user.file(
      "hookpost.json",
      JSON.stringify({
        sources: [{ id: "web", name: "Web" }],
        destinations: [{ id: "d1", name: "D1", sources: ["web"], urls: ["https://d1.example.com"] }],
      }),
    );
    const before = await revision();
    const dry = ok(await user.run(["apply", "-f", path, "--dry-run"]));
    expect(dry.stdout).toContain("destination d1: would be created");
    expect(dry.stdout).toContain("Dry run, nothing was changed");
    expect(await revision()).toBe(before);
    ok(await user.run(["apply", "-f", path]));
    expect((await t.stack.admin.listSources({})).sources.map((x) => x.id)).toEqual(["web"]);
    expect((await t.stack.admin.listDestinations({})).destinations.map((x) => x.id)).toEqual(["d1"]);
  });

  it("an invalid file is refused with every problem named by its path, and nothing changes", async () => {
    const bad = await user.file(
      "bad.yaml",
      `
sources:
  - id: web
    name: Web
destinations:
  - id: ok
    name: OK
    sources: [web]
    urls: [https://ok.example.com]
  - id: broken
    name: Broken
    sources: [web]
    urls: [not-a-url, https://fine.example.com]
    headers: { Content-Type: text/plain }
    signing: md5
    url: https://typo.example.com
`,
    );
    const before = await revision();
    const r = await user.run(["apply", "-f", bad]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("error: ");
    expect(r.stderr).toContain("has 4 problems; nothing was changed");
    expect(r.stderr).toContain(
      '  destinations[1].urls[0]: "not-a-url" is not an absolute URL (e.g. https://example.com/hook) (line 13)',
    );
    expect(r.stderr).toContain(
      '  destinations[1].headers["Content-Type"]: "Content-Type" is set by Hookpost and cannot be configured (line 14)',
    );
    expect(r.stderr).toContain("  destinations[1].signing: must be one of segment, standard-webhooks");
    expect(r.stderr).toContain('  destinations[1].url: unknown key (did you mean "urls"?)');
    expect(await revision()).toBe(before);
  });

  it("unknown sources, missing files, bad YAML and unset secret variables are clear errors", async () => {
    const unknown = await user.file(
      "unknown.yaml",
      "destinations:\n  - { id: d, name: D, sources: [ghost], urls: ['https://a.example.com'] }\n",
    );
    const before = await revision();
    let r = await user.run(["apply", "-f", unknown]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      '  destinations[0].sources[0]: unknown source "ghost" (not in the file and not on the server)',
    );

    r = await user.run(["apply", "-f", join(user.dir, "missing.yaml")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: cannot read .*missing\.yaml: no such file\n$/);

    r = await user.run(["apply", "-f", await user.file("broken.yaml", "sources: [\n  - id: web\n")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: .*broken\.yaml is not valid YAML \(line \d+, column \d+\): /);

    r = await user.run(["apply", "-f", await user.file("broken.json", '{"sources": [}')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/broken\.json is not valid JSON/);

    r = await user.run(["apply", "-f", await user.file("env.yaml", yaml)]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("  destinations[0].secretEnv: environment variable CRM_SECRET is not set");

    r = await user.run(["apply"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("required option '-f, --file <file>'");
    expect(await revision()).toBe(before);
  });

  it("reads the file from stdin with -f -", async () => {
    const r = ok(await user.run(["apply", "-f", "-"], {}, "sources:\n  - { id: s1, name: S1 }\n"));
    expect(r.stdout).toContain("source s1: created");
  });
});

describe("send and delete-user", () => {
  let key: string;
  beforeEach(async () => {
    key = writeKeyIn(ok(await user.run(["sources", "create", "Web", "--id", "web"])).stdout);
    // What the source gets goes to the stack's receiver.
    await t.stack.destination({ sourceIds: ["web"], urls: [t.stack.receiver.url()] });
  });

  /** The webhook body delivered for a message id. */
  async function delivered(messageId: string): Promise<Record<string, unknown>> {
    const req = await until(
      () => t.stack.receiver.requests.find((r) => r.headers["idempotency-key"] === messageId),
      { message: `the delivery of ${messageId}` },
    );
    return JSON.parse(req.body.toString()) as Record<string, unknown>;
  }
  const messageIdIn = (stdout: string) => /message id (\S+)\n$/.exec(stdout)![1]!;
  /** `hookpost send <args>`, which must succeed: what it printed, and the webhook body delivered for it. */
  async function sendDelivered(args: string[]): Promise<{ stdout: string; body: Record<string, unknown> }> {
    const { stdout } = ok(await user.run(["send", ...args]));
    return { stdout, body: await delivered(messageIdIn(stdout)) };
  }

  it("sends each call type with the write key and prints the message id", async () => {
    const track = await sendDelivered([
      "track",
      "--write-key",
      key,
      "--user-id",
      "u1",
      "--event",
      "Signed Up",
      "--properties",
      '{"plan":"pro","seats":3}',
      "--context",
      '{"ip":"1.2.3.4"}',
      "--timestamp",
      "2026-11-21T09:30:00Z",
    ]);
    expect(track.stdout).toMatch(/^Stored track call, message id \S+\n$/);
    expect(track.body).toMatchObject({
      type: "track",
      userId: "u1",
      event: "Signed Up",
      properties: { plan: "pro", seats: 3 },
    });

    const json = JSON.parse(
      ok(
        await user.run(["--json", "send", "identify", "--user-id", "u1", "--traits", '{"email":"a@b.c"}'], {
          HOOKPOST_WRITE_KEY: key,
        }),
      ).stdout,
    ) as { type: string; messageId: string };
    expect(json.type).toBe("identify");
    expect(await delivered(json.messageId)).toMatchObject({ type: "identify", userId: "u1" });

    const types: unknown[] = [];
    for (const args of [
      ["page", "--anonymous-id", "a1", "--name", "Home", "--properties", '{"url":"https://x"}'],
      ["screen", "--user-id", "u1", "--name", "Settings"],
      ["group", "--user-id", "u1", "--group-id", "g1", "--traits", '{"plan":"pro"}'],
      ["alias", "--user-id", "u2", "--previous-id", "u1"],
    ]) {
      types.push((await sendDelivered([...args, "--write-key", key])).body.type);
    }
    expect(types).toEqual(["page", "screen", "group", "alias"]);
  });

  it("bad input is refused before anything is sent", async () => {
    const before = await eventsStored();
    const cases: [string[], RegExp][] = [
      [
        ["send", "track", "--user-id", "u", "--event", "E", "--properties", "{bad"],
        /--properties <json>.*not valid JSON/,
      ],
      [["send", "track", "--user-id", "u", "--event", "E", "--properties", "[1]"], /expected a JSON object/],
      [
        ["send", "purchase", "--user-id", "u"],
        /Allowed choices are identify, track, page, screen, group, alias/,
      ],
      [["send", "identify", "--user-id", "u", "--event", "E"], /--event does not apply to identify calls/],
      [["send", "track", "--user-id", "u", "--event", "E", "--timestamp", "yesterday"], /ISO 8601/],
    ];
    const results = await Promise.all(cases.map(([args]) => user.run([...args, "--write-key", key])));
    cases.forEach(([args, message], i) => {
      expect(results[i]!.code, args.join(" ")).toBe(2);
      expect(results[i]!.stderr, args.join(" ")).toMatch(message);
    });
    expect(failed(await user.run(["send", "track", "--user-id", "u", "--event", "E"]), 2)).toContain(
      "no write key",
    );
    expect(await eventsStored()).toBe(before);
  });

  it("the contract's validation (checked before sending) and a wrong write key are readable", async () => {
    const before = await eventsStored();
    expect(failed(await user.run(["send", "track", "--write-key", key, "--event", "E"]), 1)).toBe(
      "error: invalid request\n  --user-id: a track call needs a user_id or an anonymous_id\n",
    );
    expect(await eventsStored()).toBe(before);
    const wrong = failed(
      await user.run(["send", "track", "--write-key", "hpk_wrong", "--user-id", "u", "--event", "E"]),
      1,
    );
    expect(wrong).toContain("error: unknown write key");
    expect(wrong).toContain("hint: check the write key");
    expect(wrong).not.toContain("hpk_wrong");
  });

  it("message ids a header or a transport would alter are refused before sending (issue 10)", async () => {
    const before = await eventsStored();
    for (const id of ["日本-1", "cli-1 ", " X", "cli-1\u00a0", "\ufeffcli-1"]) {
      const r = await user.run(sendTrack(key, id));
      expect(r.code, id).toBe(1);
      expect(r.stderr).toMatch(/^error: invalid request\n {2}--message-id: contains .* printable ASCII/);
    }
    expect(await eventsStored()).toBe(before);
    ok(await user.run(sendTrack(key, "cli-1")));
  });

  it("delete-user prints the request id and the sources; deletion shows its erasure", async () => {
    ok(await user.run(["send", "identify", "--write-key", key, "--user-id", "gone"]));
    const r = ok(await user.run(["delete-user", "gone"]));
    expect(r.stdout).toMatch(
      /^Deletion request del_\S+ for user gone\.\nDestinations of source web will be notified\.\nTheir calls are being erased from Hookpost's stores: hookpost deletion del_\S+\n$/,
    );
    const requestId = /^Deletion request (del_\S+) for/.exec(r.stdout)![1]!;
    const shown = ok(await user.run(["deletion", requestId]));
    expect(shown.stdout).toMatch(
      new RegExp(`^Deletion request ${requestId}, made \\S+\\.\nNotified: web\\.\nErased: `),
    );
    const json = await runJson<{
      notifiedSourceIds: string[];
      erased: { deadLetters: number };
    }>(user, ["deletion", requestId]);
    expect(json.notifiedSourceIds).toEqual(["web"]);
    expect(json.erased.deadLetters).toBeGreaterThanOrEqual(0);
    expect((await user.run(["deletion", "del_unknown"])).code).toBe(1);
    const none = await runJson<{
      sourceIds: string[];
    }>(user, ["delete-user", "never-seen"]);
    expect(none.sourceIds).toEqual([]);
  });
});

describe("dead letters", () => {
  let refusing: Receiver;
  let key: string;
  beforeAll(async () => {
    refusing = await Receiver.http();
  });
  afterAll(async () => {
    await refusing?.close();
  });
  beforeEach(async () => {
    refusing.respond = () => ({ status: 400 }); // 400 is not retried: dead at once
    key = writeKeyIn(ok(await user.run(["sources", "create", "Web", "--id", "web"])).stdout);
    ok(
      await user.run([
        "destinations",
        "create",
        "--id",
        "d1",
        "--name",
        "D1",
        "--source",
        "web",
        "--url",
        refusing.url(),
      ]),
    );
    await t.stack.waitForDestination("d1");
  });

  it("lists them as a table and as JSON, and replays all or some", async () => {
    expect(ok(await user.run(["dead-letters", "list", "--destination", "d1"])).stdout).toBe(
      "No dead letters for destination d1.\n",
    );
    for (const id of ["m-1", "m-2"]) {
      ok(await user.run(sendTrack(key, id)));
    }
    type Dead = { sequence: number; messageId: string; body: string };
    const dead = await until(
      async () => {
        const list = JSON.parse(
          ok(await user.run(["--json", "dead-letters", "list", "--destination", "d1"])).stdout,
        ) as Dead[];
        return list.length >= 2 && list;
      },
      { timeout: 20_000, interval: 200, message: "two dead letters listed by the CLI" },
    );
    const s1 = dead.find((d) => d.messageId === "m-1")!.sequence;
    const s2 = dead.find((d) => d.messageId === "m-2")!.sequence;
    const url = refusing.url().replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    const table = ok(await user.run(["dead-letters", "list", "--destination", "d1"])).stdout;
    expect(table).toMatch(/^SEQ\s+MESSAGE ID\s+ATTEMPTS\s+DEAD AT\s+REASON\s+LAST OUTCOMES$/m);
    for (const [seq, id] of [
      [s1, "m-1"],
      [s2, "m-2"],
    ] as const) {
      expect(table).toMatch(
        new RegExp(`^${seq}\\s+${id}\\s+1\\s+.*400 is not retried\\s+${url} → 400 is not retried$`, "m"),
      );
    }

    const list = JSON.parse(
      ok(await user.run(["--json", "dead-letters", "list", "--destination", "d1", "--limit", "1"])).stdout,
    ) as Dead[];
    expect(list).toEqual([expect.objectContaining({ sequence: Math.min(s1, s2) })]);
    expect(JSON.parse(list[0]!.body)).toMatchObject({ type: "track", userId: "u", event: "E" });

    // The endpoint is fixed: replaying one delivers just it, replaying the rest the other.
    refusing.respond = () => ({ status: 200 });
    const some = ok(
      await user.run(["dead-letters", "replay", "--destination", "d1", "--sequence", String(s2)]),
    );
    expect(some.stdout).toBe("Replayed 1 dead letter of destination d1.\n");
    const deliveriesOf = (id: string) =>
      refusing.requests.filter((r) => r.headers["idempotency-key"] === id).length;
    await until(() => deliveriesOf("m-2") === 2, {
      message: "m-2 delivered again",
    });
    const all = JSON.parse(
      ok(await user.run(["--json", "dead-letters", "replay", "--destination", "d1"])).stdout,
    ) as { replayed: number };
    expect(all.replayed).toBe(1);
    await until(() => deliveriesOf("m-1") === 2, {
      message: "m-1 delivered again",
    });
    expect(ok(await user.run(["dead-letters", "list", "--destination", "d1"])).stdout).toBe(
      "No dead letters for destination d1.\n",
    );
  });

  it("checks its flags", async () => {
    const cases = [
      ["dead-letters", "list", "--after", "x"],
      ["dead-letters", "list", "--destination", "d1", "--limit", "0"],
      ["dead-letters", "replay", "--destination", "d1", "--since", "yesterday"],
      ["dead-letters", "replay", "--destination", "d1", "--sequence", "x"],
    ];
    const results = await Promise.all(cases.map((args) => user.run(args)));
    cases.forEach((args, i) => {
      expect(results[i]!.code, args.join(" ")).toBe(2);
    });
  });
});

describe("connection and auth errors", () => {
  it("an unreachable endpoint gets a hint, exit 1", async () => {
    const r = await user.run(["sources", "list"], { HOOKPOST_ENDPOINT: "127.0.0.1:1" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: cannot reach 127.0.0.1:1");
    expect(r.stderr).toContain("hint: is the ingest running at 127.0.0.1:1?");
  });

  it("a wrong token is UNAUTHENTICATED with a hint about ADMIN_TOKEN, and is never printed", async () => {
    const r = await hookpost(["sources", "list"], { ...user.env, ADMIN_TOKEN: "wrong-token-123456" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: invalid admin token");
    expect(r.stderr).toContain("hint: check the admin token: set ADMIN_TOKEN");
    expect(r.stdout + r.stderr).not.toContain("wrong-token-123456");
    const flag = await hookpost(["--token", "wrong-token-123456", "--json", "sources", "list"], {
      HOOKPOST_ENDPOINT: t.stack.ingest.address,
    });
    expect(JSON.parse(flag.stderr)).toMatchObject({ error: { code: "UNAUTHENTICATED" } });
    expect(flag.stdout + flag.stderr).not.toContain("wrong-token-123456");
  });

  it("no token at all is a usage error", async () => {
    expect(
      failed(await hookpost(["sources", "list"], { HOOKPOST_ENDPOINT: t.stack.ingest.address }), 2),
    ).toContain("error: no admin token: set ADMIN_TOKEN or pass --token");
  });

  it("--help and --version exit 0", async () => {
    const help = await user.run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: hookpost");
    expect(help.stdout).toContain("dead-letters");
    const version = await user.run(["--version"]);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});

describe("TLS", () => {
  it("connects with --ca-file (or an https:// endpoint) and refuses an untrusted certificate", async () => {
    const cert = join(user.dir, "cert.pem");
    const key = join(user.dir, "key.pem");
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"].concat([
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ]),
      { stdio: "pipe" },
    );
    // A second real ingest, serving TLS with that certificate.
    const tls = await Stack.start({ ingest: { tls: { certFile: cert, keyFile: key } }, dispatchers: 0 });
    try {
      const tlsEnv = { HOOKPOST_ENDPOINT: tls.ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN };
      const [withCa, https, untrusted, plain] = await Promise.all([
        hookpost(["--ca-file", cert, "sources", "list"], tlsEnv),
        hookpost(
          ["--endpoint", `https://${tls.ingest.address}`, "--ca-file", cert, "sources", "list"],
          tlsEnv,
        ),
        hookpost(["--tls", "sources", "list"], tlsEnv),
        hookpost(["--ca-file", join(user.dir, "no-such.pem"), "sources", "list"], tlsEnv),
      ]);
      expect(withCa.stdout).toContain("No sources.");
      expect(withCa.code).toBe(0);
      expect(https.code).toBe(0);
      expect(untrusted.code).toBe(1);
      expect(untrusted.stderr).toMatch(
        /^error: cannot reach .*self-signed certificate\)\nhint: the server's TLS certificate is not trusted/,
      );
      expect(plain.code).toBe(2);
      expect(plain.stderr).toContain("--ca-file: cannot read");
    } finally {
      await tls.close();
    }
  });
});
