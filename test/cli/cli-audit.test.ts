import { randomBytes } from "node:crypto";
import { tokenFingerprint } from "@hookpost/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { createCrm, hookpostExitsZero, ok } from "./run-cli.js";

// The audit log from the CLI alone (a real process against a real ingest): changes made with the
// CLI are listed with who, what and when, in a table and as JSON, without a secret or header value.

let stack: Stack;
let env: Record<string, string>;

beforeAll(async () => {
  // No dispatcher: only admin writes matter here.
  stack = await Stack.start({ dispatchers: 0 });
  env = { HOOKPOST_ENDPOINT: stack.ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN };
});

afterAll(async () => {
  await stack?.close();
});

const cli = (args: string[], extra: Record<string, string> = {}) =>
  hookpostExitsZero(args, { ...env, ...extra });

interface Listed {
  records: {
    action: string;
    resourceId: string;
    actor: { kind: string; id: string };
    outcome: string;
    time: string;
    revision: number;
    changes: {
      resourceId: string;
      before: Record<string, unknown> | null;
      after: Record<string, unknown> | null;
      changedFields: string[];
    }[];
  }[];
  nextPageToken: string;
}

describe("hookpost audit list", () => {
  it("lists the CLI's own changes: who, what and when, never a secret", async () => {
    const secret = `secret-${randomBytes(8).toString("hex")}`;
    const headerValue = `Bearer ${randomBytes(8).toString("hex")}`;
    const created = await cli(["sources", "create", "Shop", "--id", "shop"]);
    const writeKey = /(hpk_\S+)/.exec(created.stdout)![1]!;
    await cli(
      createCrm(
        "shop",
        ["https://crm.example.com/in"],
        "--header",
        `Authorization: ${headerValue}`,
        "--secret-env",
        "CRM_SECRET",
      ),
      { CRM_SECRET: secret },
    );
    await cli(["destinations", "update", "crm", "--url", "https://elsewhere.example.net/in", "--disable"]);
    const rotated = await cli(["--json", "destinations", "rotate-secret", "crm"]);
    const newSecret = (JSON.parse(rotated.stdout) as { secret: string }).secret;
    expect(newSecret.length).toBeGreaterThan(10);

    const table = ok(await cli(["audit", "list"])).stdout;
    const lines = table.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^TIME\s+ACTOR\s+ACTION\s+RESOURCE\s+OUTCOME\s+REVISION\s+WHAT$/);
    const fingerprint = tokenFingerprint(STACK_ADMIN_TOKEN);
    expect(table).toMatch(
      new RegExp(
        `\\d{4}-\\S+Z\\s+admin ${fingerprint}\\s+RotateSecret\\s+destination crm\\s+succeeded\\s+\\d+\\s+changed `,
      ),
    );
    expect(table).toMatch(/UpdateDestination\s+destination crm\s+succeeded\s+\d+\s+changed enabled, urls/);
    expect(table).toMatch(/CreateDestination\s+destination crm\s+succeeded\s+\d+\s+created/);
    expect(table).toMatch(/CreateSource\s+source shop\s+succeeded\s+\d+\s+created/);

    const json = JSON.parse(ok(await cli(["--json", "audit", "list", "--resource", "crm"])).stdout) as Listed;
    expect(json.records.map((r) => r.action)).toEqual([
      "RotateSecret",
      "UpdateDestination",
      "CreateDestination",
    ]);
    expect(json.nextPageToken).toBe("");
    const update = json.records[1]!;
    expect(update.actor).toEqual({ kind: "admin-token", id: fingerprint });
    expect(update.outcome).toBe("succeeded");
    expect(update.changes[0]!.before).toMatchObject({ urls: ["https://crm.example.com/in"], enabled: true });
    expect(update.changes[0]!.after).toMatchObject({
      urls: ["https://elsewhere.example.net/in"],
      enabled: false,
    });
    expect(Date.parse(update.time)).toBeGreaterThan(Date.now() - 60_000);

    for (const out of [table, JSON.stringify(json), (await cli(["--json", "audit", "list"])).stdout]) {
      for (const s of [secret, headerValue, newSecret, writeKey, STACK_ADMIN_TOKEN])
        expect(out).not.toContain(s);
    }
  });

  it("pages with --limit and --page-token", async () => {
    const first = await cli(["audit", "list", "--limit", "1"]);
    expect(first.stdout.trimEnd().split("\n")).toHaveLength(2);
    const token = /--page-token (\d+)/.exec(first.stderr)?.[1];
    expect(token, first.stderr).toBeDefined();
    const second = await cli(["--json", "audit", "list", "--limit", "1", "--page-token", token!]);
    expect((JSON.parse(second.stdout) as Listed).records.map((r) => r.action)).toEqual(["UpdateDestination"]);
    expect((await cli(["audit", "list", "--resource", "nothing-here"])).stdout).toBe(
      "No audit records for nothing-here.\n",
    );
  });
});
