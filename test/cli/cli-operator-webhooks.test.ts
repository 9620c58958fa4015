import { generateStandardWebhookSecret } from "@hookpost/receiver";
import { describe, expect, it } from "vitest";
import { STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { stackWithStore } from "../helpers/stack-store.js";
import { until } from "../helpers/until.js";
import { failed, ok, useCliUser } from "./run-cli.js";

// `hookpost operator-webhooks …` and the `operatorWebhooks:` key of `hookpost apply -f`, as a
// real process against the real admin service. What the server stored (the secret included) is
// read from the configuration bucket by the test's own store.

const t = stackWithStore();
const user = useCliUser(() => t.stack.ingest.address, STACK_ADMIN_TOKEN);

/** The webhook as stored, once the test's store has seen `check` hold. */
const stored = (
  id: string,
  check: (w: NonNullable<ReturnType<typeof t.store.operatorWebhook>>) => boolean = () => true,
) =>
  until(
    () => {
      const w = t.store.operatorWebhook(id);
      return w && check(w) && w;
    },
    { message: `operator webhook ${id} stored` },
  );

describe("operator-webhooks", () => {
  it("create prints a generated secret once; get, list, update and delete work; --json says the same", async () => {
    const created = ok(
      await user.run([
        "operator-webhooks",
        "create",
        "--id",
        "pager",
        "--name",
        "Pager",
        "--url",
        "https://pager.example.com/in",
        "--event",
        "destination.failing",
        "--event",
        "destination.recovered",
        "--behind-after",
        "10m",
      ]),
    );
    const secret = /(whsec_\S+)/.exec(created.stdout)?.[1];
    expect(secret, created.stdout).toBeDefined();
    expect(created.stdout).toContain("Created operator webhook pager");
    expect((await stored("pager")).secret).toBe(secret);

    const got = ok(await user.run(["operator-webhooks", "get", "pager"]));
    expect(got.stdout).not.toContain(secret!);
    expect(got.stdout).toMatch(/events:\s+destination\.failing, destination\.recovered/);
    expect(got.stdout).toMatch(/behind after:\s+10m\n/);
    expect(got.stdout).toMatch(/failing below:\s+0\.5 \(default\)/);

    const mine = generateStandardWebhookSecret();
    const updated = JSON.parse(
      ok(
        await user.run(
          [
            "--json",
            "operator-webhooks",
            "update",
            "pager",
            "--all-events",
            "--failing-below",
            "0.9",
            "--secret-env",
            "PAGER_SECRET",
            "--disable",
          ],
          { PAGER_SECRET: mine },
        ),
      ).stdout,
    ) as { eventTypes: string[]; failingBelow: number; enabled: boolean; secretSet: boolean };
    expect(updated).toMatchObject({ eventTypes: [], failingBelow: 0.9, enabled: false, secretSet: true });
    expect((await stored("pager", (w) => w.secret === mine)).behindAfterMs).toBe(600_000);

    const list = ok(await user.run(["operator-webhooks", "list"]));
    expect(list.stdout).toMatch(/pager\s+Pager\s+no\s+https:\/\/pager\.example\.com\/in\s+all/);

    ok(await user.run(["operator-webhooks", "delete", "pager"]));
    expect(failed(await user.run(["operator-webhooks", "get", "pager"]), 1)).toContain(
      'operator webhook "pager" does not exist',
    );
  });

  it("refuses an unknown event type before calling, and names the server's field on a bad URL", async () => {
    expect(
      failed(
        await user.run([
          "operator-webhooks",
          "create",
          "--name",
          "x",
          "--url",
          "https://x.example.com",
          "--event",
          "nope",
        ]),
        2,
      ),
    ).toContain("expected one of destination.failing");
    expect(
      failed(await user.run(["operator-webhooks", "create", "--name", "x", "--url", "ftp://x"]), 1),
    ).toContain("operator_webhook.url");
  });
});

describe("apply -f operatorWebhooks", () => {
  const yaml = `
operatorWebhooks:
  - id: chat
    name: Chat
    url: https://chat.example.com/hookpost
    events: [dead_letter.created, destination.disabled]
    failingBelow: 0.6
  - id: oncall
    name: On call
    url: https://oncall.example.com/in
    secretEnv: ONCALL_SECRET
    behindAfter: 5m
`;

  it("creates them (printing generated secrets once), leaves them alone on a re-apply, updates what differs", async () => {
    const oncall = generateStandardWebhookSecret();
    const path = await user.file("ops.yaml", yaml);
    const first = ok(await user.run(["apply", "-f", path], { ONCALL_SECRET: oncall }));
    expect(first.stdout).toContain("operator webhook chat: created");
    expect(first.stdout).toContain("operator webhook oncall: created");
    const chatSecret = /chat: (whsec_\S+)/.exec(first.stdout)?.[1];
    expect((await stored("chat")).secret).toBe(chatSecret);
    expect(first.stdout).not.toContain(oncall);
    expect(await stored("oncall")).toMatchObject({ secret: oncall, behindAfterMs: 300_000, eventTypes: [] });

    const second = ok(await user.run(["apply", "-f", path], { ONCALL_SECRET: oncall }));
    expect(second.stdout).toContain("Summary: 0 created, 0 updated, 2 unchanged.");
    expect(second.stdout).not.toContain("whsec_");

    const edited = await user.file(
      "ops-edited.yaml",
      yaml.replace("failingBelow: 0.6", "failingBelow: 0.7").replace("behindAfter: 5m", ""),
    );
    const third = JSON.parse(
      ok(await user.run(["--json", "apply", "-f", edited], { ONCALL_SECRET: oncall })).stdout,
    ) as {
      results: { id: string; action: string; changes?: string[] }[];
    };
    expect(third.results.map((r) => [r.id, r.action, r.changes])).toEqual([
      ["chat", "update", ["failing_below"]],
      ["oncall", "update", ["behind_after"]],
    ]);
    expect((await stored("chat", (w) => w.failingBelow === 0.7)).eventTypes).toEqual([
      "dead_letter.created",
      "destination.disabled",
    ]);
    expect((await stored("oncall", (w) => w.behindAfterMs === undefined)).secret).toBe(oncall);

    const rotated = generateStandardWebhookSecret();
    ok(await user.run(["apply", "-f", edited, "--update-secrets"], { ONCALL_SECRET: rotated }));
    await stored("oncall", (w) => w.secret === rotated);
  });

  it("names every problem of the file with its path before sending anything", async () => {
    const bad = await user.file(
      "bad-ops.yaml",
      "operatorWebhooks:\n  - { id: x, name: X, url: 'ftp://x', events: [destination.exploded], failingBelow: 3, behindAfter: soon, secret: nope }\n",
    );
    const r = await user.run(["apply", "-f", bad]);
    expect(r.code).toBe(1);
    for (const path of ["url", "events[0]", "failingBelow", "behindAfter", "secret"]) {
      expect(r.stderr).toContain(`operatorWebhooks[0].${path}`);
    }
  });
});
