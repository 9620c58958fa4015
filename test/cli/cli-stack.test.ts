import { createHmac } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { useStack } from "../helpers/use-stack.js";
import { type CliResult, hookpost, useCliUser } from "./run-cli.js";

// The CLI, as a real process, drives the whole real pipeline (ingest, NATS, dispatcher, a
// webhook receiver): set up with sources create and apply -f, send, list destinations, request a
// user's deletion, and inspect and replay a dead letter.

// The receiver first: its hook closes it after the stack's.
const strict = useFixture(() => Receiver.http(), "strict receiver");
const stack = useStack();
const user = useCliUser(() => stack.ingest.address, STACK_ADMIN_TOKEN);

async function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
  const r = await hookpost(args, { ...user.env, ...extraEnv });
  expect(r.stderr, `hookpost ${args.join(" ")}\n${r.stdout}\n${r.stderr}`).toBe("");
  expect(r.code, `hookpost ${args.join(" ")}`).toBe(0);
  expect(r.stdout).not.toContain(STACK_ADMIN_TOKEN);
  return r;
}

const sign = (secret: string, body: Buffer) => createHmac("sha1", secret).update(body).digest("hex");

describe("the hookpost CLI against a running stack", () => {
  it("sources create, apply -f, send, destinations list, delete-user, dead-letters list and replay", async () => {
    // sources create: the write key is printed once.
    const created = await cli(["sources", "create", "Web app", "--id", "web"]);
    expect(created.stdout).toContain('Created source web ("Web app").');
    const webKey = /hpk_\S+/.exec(created.stdout)?.[0];
    expect(webKey).toBeDefined();

    // apply -f: "web" exists (left alone), "app" is created; two destinations, one of them at a
    // receiver that refuses everything with 400 for now.
    strict.respond = () => ({ status: 400, body: "rejected" });
    const file = join(user.dir, "hookpost.yaml");
    await writeFile(
      file,
      `sources:
  - { id: web, name: Web app }
  - { id: app, name: Mobile app }
destinations:
  - id: hook
    name: Main hook
    sources: [web, app]
    urls: ["${stack.receiver.url()}"]
    secretEnv: HOOK_SECRET
  - id: strict
    name: Strict
    sources: [app]
    urls: ["${strict.url()}"]
    secret: strict-secret
`,
    );
    const applied = await cli(["apply", "-f", file], { HOOK_SECRET: "hook-secret" });
    expect(applied.stdout).toContain("Summary: 3 created, 0 updated, 1 unchanged.");
    const appKey = /app: (hpk_\S+)/.exec(applied.stdout)?.[1];
    expect(appKey).toBeDefined();
    // A second apply changes nothing.
    const again = await cli(["--json", "apply", "-f", file], { HOOK_SECRET: "hook-secret" });
    expect(JSON.parse(again.stdout)).toMatchObject({ summary: { created: 0, updated: 0, unchanged: 4 } });
    await stack.waitForDestination("hook");
    await stack.waitForDestination("strict");

    // send: delivered, signed with the destination's secret.
    const sent = await cli([
      "send",
      "track",
      "--write-key",
      webKey!,
      "--user-id",
      "u-1",
      "--event",
      "Signed Up",
      "--properties",
      '{"plan":"pro"}',
    ]);
    const messageId = /message id (\S+)/.exec(sent.stdout)?.[1];
    expect(sent.stdout).toContain("Stored track call, message id");
    const [first] = await stack.receiver.waitFor(1);
    expect(first!.headers["idempotency-key"]).toBe(messageId);
    expect(JSON.parse(first!.body.toString())).toMatchObject({
      type: "track",
      userId: "u-1",
      event: "Signed Up",
      properties: { plan: "pro" },
    });
    expect(first!.headers["x-signature"]).toBe(sign("hook-secret", first!.body));

    // destinations list: both, as a table and as JSON.
    const table = await cli(["destinations", "list"]);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+ENABLED\s+SOURCES\s+URLS\s+SIGNING\s+SECRET/m);
    expect(table.stdout).toMatch(/^hook\s+Main hook\s+yes\s+web,app\s/m);
    expect(table.stdout).toMatch(/^strict\s+Strict\s+yes\s+app\s/m);
    const listed = JSON.parse((await cli(["--json", "destinations", "list"])).stdout) as Array<{
      id: string;
      sourceIds: string[];
      urls: string[];
      sharedSecretSet: boolean;
      enabled: boolean;
    }>;
    expect(listed.map((d) => d.id).sort()).toEqual(["hook", "strict"]);
    expect(listed.find((d) => d.id === "hook")).toMatchObject({
      sourceIds: ["web", "app"],
      urls: [stack.receiver.url()],
      sharedSecretSet: true,
      enabled: true,
    });
    expect(JSON.stringify(listed)).not.toContain("hook-secret");

    // delete-user: u-1 was seen by "web" only, so "hook" (not "strict") is told.
    const deleted = await cli(["delete-user", "u-1"]);
    expect(deleted.stdout).toMatch(/^Deletion request \S+ for user u-1\.$/m);
    expect(deleted.stdout).toContain("Destinations of source web will be notified.");
    const [, notice] = await stack.receiver.waitFor(2);
    const noticeBody = JSON.parse(notice!.body.toString()) as Record<string, unknown>;
    expect(Object.keys(noticeBody)).toEqual(["type", "userId", "timestamp"]);
    expect(noticeBody).toMatchObject({ type: "delete", userId: "u-1" });
    expect(Number.isNaN(Date.parse(String(noticeBody.timestamp)))).toBe(false);
    expect(notice!.headers["x-signature"]).toBe(sign("hook-secret", notice!.body));

    // A call from "app" reaches both; "strict" answers 400, so it is dead-lettered at once.
    const sentApp = await cli([
      "--json",
      "send",
      "track",
      "--write-key",
      appKey!,
      "--user-id",
      "u-2",
      "--event",
      "Opened App",
    ]);
    const appMessageId = (JSON.parse(sentApp.stdout) as { messageId: string }).messageId;
    await stack.receiver.waitFor(3);
    await strict.waitFor(1);
    type Dead = Array<{
      sequence: number | string;
      messageId: string;
      attempts: number;
      outcomes: unknown[];
    }>;
    const dead = await until(
      async () => {
        const r = await cli(["--json", "dead-letters", "list", "--destination", "strict"]);
        const list = JSON.parse(r.stdout) as Dead;
        return list.length > 0 && list;
      },
      { timeout: 20_000, interval: 200, message: "a dead letter listed by the CLI" },
    );
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ messageId: appMessageId, attempts: 1 });
    expect(JSON.stringify(dead[0]!.outcomes)).toContain("400");
    const human = await cli(["dead-letters", "list", "--destination", "strict"]);
    expect(human.stdout).toMatch(/^SEQ\s+MESSAGE ID\s+ATTEMPTS\s+DEAD AT\s+REASON\s+LAST OUTCOMES/m);
    expect(human.stdout).toContain(appMessageId);
    expect(human.stdout).toContain("400 is not retried");
    expect((await cli(["dead-letters", "list", "--destination", "hook"])).stdout).toContain(
      "No dead letters for destination hook.",
    );

    // The endpoint is fixed: replay delivers it (same message id, signed), and the record is gone.
    strict.respond = () => ({ status: 200 });
    const replayed = await cli(["dead-letters", "replay", "--destination", "strict"]);
    expect(replayed.stdout).toContain("Replayed 1 dead letter of destination strict.");
    const [, redelivered] = await strict.waitFor(2);
    expect(redelivered!.headers["idempotency-key"]).toBe(appMessageId);
    expect(redelivered!.body.equals(strict.requests[0]!.body)).toBe(true);
    expect(redelivered!.headers["x-signature"]).toBe(sign("strict-secret", redelivered!.body));
    const after = await cli(["--json", "dead-letters", "list", "--destination", "strict"]);
    expect(JSON.parse(after.stdout)).toEqual([]);
    // Delivered once to each destination, nothing else on the way.
    expect(stack.receiver.requests).toHaveLength(3);
    expect(strict.requests).toHaveLength(2);
  });
});
