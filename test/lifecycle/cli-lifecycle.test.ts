import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { ConsentMissing, Ordering, Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { CONFIG_BUCKET } from "@hookpost/core";
import {
  generateStandardWebhookSecret,
  verifySegmentRequest,
  verifyStandardWebhook,
} from "@hookpost/receiver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hookpost, hookpostExitsZero } from "../cli/run-cli.js";
import { publishCall, track } from "../dispatcher/helpers.js";
import { waitForRevision } from "../helpers/revisions.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/** The CLI (a real process) for the destination lifecycle: rotate-secret, limits, a visible pause. */

let stack: Stack;
let env: Record<string, string>;

beforeAll(async () => {
  stack = await Stack.start();
  env = { HOOKPOST_ENDPOINT: stack.ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN };
});

afterAll(async () => {
  await stack?.close();
});

const cli = (args: string[], extraEnv: Record<string, string> = {}) =>
  hookpostExitsZero(args, { ...env, ...extraEnv });

/** `destinations create --json` on a new source, with `flags`: the created destination as JSON. */
async function createWith(name: string, flags: string[]) {
  const src = (await stack.source()).id;
  const url = stack.receiver.url(`/${name}-cli`);
  const created = await cli([
    "destinations",
    "create",
    "--name",
    name,
    "--source",
    src,
    "--url",
    url,
    ...flags,
    "--json",
  ]);
  return JSON.parse(created.stdout) as { id: string } & Record<string, unknown>;
}

/** Runs `body` with an apply file holding `yaml`, removed afterwards. */
async function withApplyFile(yaml: string, body: (file: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "hookpost-apply-"));
  try {
    const file = join(dir, "hookpost.yaml");
    writeFileSync(file, yaml);
    await body(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Publishes one call of source `src` and returns the request the receiver got for it. */
async function deliveredRequest(src: string) {
  const call = track({ sourceId: src });
  await publishCall(stack.nc.jetstream(), call);
  await until(() => stack.receiver.messageIds().has(call.messageId), {
    timeout: 20_000,
    message: "delivery",
  });
  return stack.receiver.requests.find((r) => r.headers["idempotency-key"] === call.messageId)!;
}

describe("hookpost destinations (lifecycle)", () => {
  it("apply -f switching to standard-webhooks during an overlap with a secret that is no whsec_ key sends the file's secret along: the overlap ends, no secret that cannot sign is left", async () => {
    const src = (await stack.source()).id;
    const d = await stack.destination({ sourceIds: [src], sharedSecret: "old-secret" });
    const fresh = generateStandardWebhookSecret();
    await stack.admin.rotateSecret({
      destinationId: d.id,
      newSecret: fresh,
      previousValidFor: durationFromMs(3600_000),
    });
    const yaml = `destinations:
  - id: ${d.id}
    name: ${d.name}
    sources: [${src}]
    urls: [${d.urls[0]}]
    secretEnv: SW
    signing: standard-webhooks
`;
    await withApplyFile(yaml, async (file) => {
      // The server refuses signing alone (test/lifecycle/rotation.test.ts); apply sends the
      // file's secret with a signing change, which is a hard switch.
      const applied = await cli(["--json", "apply", "-f", file], { SW: fresh });
      expect(applied.stdout).toContain("shared_secret");
      const now = (await stack.admin.getDestination({ id: d.id })).destination;
      expect(now?.signing).toBe(Signing.STANDARD_WEBHOOKS);
      expect(now?.previousSecretExpireTime).toBeUndefined();
      // Every dispatcher signs with the applied record: wait for its revision in the bucket.
      const kv = await stack.nc.jetstream().views.kv(CONFIG_BUCKET);
      await waitForRevision((await kv.get(`destination.${d.id}`))!.revision, stack.dispatchers);
      const req = await deliveredRequest(src);
      expect(verifyStandardWebhook(req.body, req.headers, fresh)).toBeDefined();
    });
  }, 60_000);

  it("rotate-secret prints a generated secret once, or takes one from --secret-env; both sign during the overlap", async () => {
    const src = (await stack.source()).id;
    const d = await stack.destination({ sourceIds: [src], sharedSecret: "old-secret" });
    const out = await cli(["destinations", "rotate-secret", d.id, "--overlap", "1h"]);
    const secret = /New secret \(shown once\): (\S+)/.exec(out.stdout)?.[1];
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(out.stdout).toMatch(/previous secret keeps signing until \d{4}-/);
    const shown = await cli(["destinations", "get", d.id]);
    expect(shown.stdout).toMatch(/previous secret signs until/);
    expect(shown.stdout).not.toContain(secret!);

    const given = await cli(["--json", "destinations", "rotate-secret", d.id, "--secret-env", "NEXT"], {
      NEXT: "given-secret",
    });
    expect(given.stdout).not.toContain("given-secret");
    const rotated = JSON.parse(given.stdout) as { secret: string | null; revision: number };
    expect(rotated.secret).toBeNull();
    await waitForRevision(rotated.revision, stack.dispatchers);
    // The generated secret (now the previous one) and the given one both verify.
    const req = await deliveredRequest(src);
    expect(verifySegmentRequest(req.body, req.headers, secret!)).toBe(true);
    expect(verifySegmentRequest(req.body, req.headers, "given-secret")).toBe(true);
    expect(verifySegmentRequest(req.body, req.headers, "old-secret")).toBe(false);

    const bad = await hookpost(["destinations", "rotate-secret", d.id, "--overlap", "soon"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--overlap/);
  }, 120_000);

  it("standard-webhooks-ed25519: create and get show the public key, rotate-secret both, and no private key is ever printed; apply -f keeps the generated key", async () => {
    const created = await createWith("ed", ["--signing", "standard-webhooks-ed25519"]);
    expect(created).toMatchObject({ signing: "standard-webhooks-ed25519", sharedSecretSet: true });
    const [key] = created.signingPublicKeys as [string];
    expect(key).toMatch(/^whpk_/);
    const get = await cli(["destinations", "get", created.id]);
    expect(get.stdout).toMatch(/^signing:\s+standard-webhooks-ed25519$/m);
    expect(get.stdout).toContain(`  ${key}\n`);
    const src = (created.sourceIds as string[])[0]!;
    await stack.waitForDestination(created.id);
    const req = await deliveredRequest(src);
    expect(verifyStandardWebhook(req.body, req.headers, key).id).toBe(req.headers["idempotency-key"]);

    const rotated = await cli(["destinations", "rotate-secret", created.id, "--overlap", "1h"]);
    expect(rotated.stdout).not.toMatch(/New secret|whsk_/);
    const keys = [...rotated.stdout.matchAll(/^ {2}(whpk_\S+)/gm)].map((m) => m[1]);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(key);
    expect(rotated.stdout).toContain(`  ${key} (previous, signs until the overlap ends)`);
    const json = JSON.parse((await cli(["--json", "destinations", "rotate-secret", created.id])).stdout) as {
      secret: string | null;
      signingPublicKeys: string[];
    };
    expect(json.secret).toBeNull();
    expect(json.signingPublicKeys).toHaveLength(2);
    expect(json.signingPublicKeys[1]).toBe(keys[0]);

    // apply -f without a key: created once, then re-applied without replacing the key.
    const yaml = `destinations:
  - id: ed-applied
    name: Ed25519 applied
    sources: [${src}]
    urls: [${stack.receiver.url("/ed-applied")}]
    signing: standard-webhooks-ed25519
`;
    await withApplyFile(yaml, async (file) => {
      await cli(["apply", "-f", file]);
      const first = (await stack.admin.getDestination({ id: "ed-applied" })).destination!.signingPublicKeys;
      expect(first).toHaveLength(1);
      const again = await cli(["apply", "-f", file]);
      expect(again.stdout).toContain("destination ed-applied: unchanged");
      const kept = (await stack.admin.getDestination({ id: "ed-applied" })).destination!.signingPublicKeys;
      expect(kept).toEqual(first);
    });
  }, 120_000);

  it("update --rate-limit/--max-in-flight, and get shows an automatic pause with its reason", async () => {
    const src = (await stack.source()).id;
    const path = "/gone-cli";
    const d = await stack.destination({ sourceIds: [src], urls: [stack.receiver.url(path)] });
    await cli(["destinations", "update", d.id, "--rate-limit", "20", "--max-in-flight", "4"]);
    const limited = await cli(["destinations", "get", d.id]);
    expect(limited.stdout).toMatch(/rate limit:\s+20\/s/);
    expect(limited.stdout).toMatch(/max in flight:\s+4/);

    const restore = stack.receiver.answerAt(path, () => ({ status: 410 }));
    try {
      await publishCall(stack.nc.jetstream(), track({ sourceId: src }));
      await until(async () => !(await stack.admin.getDestination({ id: d.id })).destination!.enabled, {
        timeout: 20_000,
        message: "the pause",
      });
    } finally {
      restore();
    }
    const paused = await cli(["destinations", "get", d.id]);
    expect(paused.stdout).toMatch(/enabled:\s+no/);
    expect(paused.stdout).toMatch(/disabled reason:\s+the endpoint answered 410 Gone/);
    const json = JSON.parse((await cli(["--json", "destinations", "get", d.id])).stdout);
    expect(json).toMatchObject({ enabled: false, rateLimitPerSecond: 20, maxInFlight: 4 });
    expect(json.disabledReason).toMatch(/410/);

    await cli(["destinations", "update", d.id, "--enable", "--rate-limit", "off"]);
    const enabled = JSON.parse((await cli(["--json", "destinations", "get", d.id])).stdout);
    expect(enabled).toMatchObject({ enabled: true, disabledReason: "", rateLimitPerSecond: null });
  }, 120_000);
  it("create/update --ordering: the detail view shows it, --json carries it, the server stores it; a bad value is a usage error", async () => {
    const d = await createWith("ordered", ["--ordering", "per-user"]);
    expect(d.ordering).toBe("per-user");
    expect((await stack.admin.getDestination({ id: d.id })).destination!.ordering).toBe(Ordering.PER_USER);

    const updated = await cli(["destinations", "update", d.id, "--ordering", "unordered"]);
    expect(updated.stdout).toMatch(/ordering changed/);
    expect(updated.stdout).toMatch(/ordering:\s+unordered/);
    expect((await stack.admin.getDestination({ id: d.id })).destination!.ordering).toBe(Ordering.UNORDERED);

    const bad = await hookpost(["destinations", "update", d.id, "--ordering", "sorted"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--ordering.*sorted/);
  });

  it("create/update --consent-category and --consent-missing: shown, carried by --json, stored; --clear-consent-categories removes them; bad values are errors", async () => {
    const d = await createWith("consent", [
      "--consent-category",
      "Analytics",
      "--consent-category",
      "Advertising",
      "--consent-missing",
      "filter",
    ]);
    expect(d).toMatchObject({ consentCategories: ["Analytics", "Advertising"], consentMissing: "filter" });
    expect((await stack.admin.getDestination({ id: d.id })).destination).toMatchObject({
      consentCategories: ["Analytics", "Advertising"],
      consentMissing: ConsentMissing.FILTER,
    });
    const shown = await cli(["destinations", "get", d.id]);
    expect(shown.stdout).toMatch(/consent:\s+"Analytics", "Advertising" \(no consent object: filter\)/);

    // The list is replaced; --consent-missing alone leaves it.
    const updated = await cli(["destinations", "update", d.id, "--consent-category", "Functional"]);
    expect(updated.stdout).toMatch(/consent categories changed/);
    expect(updated.stdout).toMatch(/consent:\s+"Functional" \(no consent object: filter\)/);
    const missing = await cli(["destinations", "update", d.id, "--consent-missing", "deliver"]);
    expect(missing.stdout).toMatch(/consent missing changed/);
    expect((await stack.admin.getDestination({ id: d.id })).destination).toMatchObject({
      consentCategories: ["Functional"],
      consentMissing: ConsentMissing.DELIVER,
    });
    const cleared = await cli(["destinations", "update", d.id, "--clear-consent-categories"]);
    expect(cleared.stdout).toMatch(/consent:\s+none/);
    expect((await stack.admin.getDestination({ id: d.id })).destination!.consentCategories).toEqual([]);

    const badWord = await hookpost(["destinations", "update", d.id, "--consent-missing", "drop"], env);
    expect(badWord.code).toBe(2);
    expect(badWord.stderr).toMatch(/--consent-missing.*drop/);
    // The server's limits, naming the field.
    const twice = await hookpost(
      ["destinations", "update", d.id, "--consent-category", "Ads", "--consent-category", "Ads"],
      env,
    );
    expect(twice.code).not.toBe(0);
    expect(twice.stderr).toMatch(/consent_categories\[1\].*"Ads" is listed twice/);
  });
});
