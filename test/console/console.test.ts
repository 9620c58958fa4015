import { adminMetadata, createClient } from "@hookpost/client";
import {
  DeliveryMode,
  type Destination,
  HttpMethod,
  Signing,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { AttemptLog } from "@hookpost/core";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { type IngestClient, ingestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { screenshots, useChromium, WIDE, watchErrors } from "./browser.js";

/**
 * The web console in a real Chromium against a real stack (nats-server, ingest with its HTTP
 * listener, dispatcher, webhook receiver): everything an operator does, with the mouse.
 * Tests run in order and build on each other (one source, one destination).
 */

let stack: Stack;
const browser = useChromium();
let context: BrowserContext;
let page: Page;
let base: string;
let errors: string[];
const requested: string[] = [];
let source: { writeKey: string; client: IngestClient };
/** Secrets the console showed once: never to be seen again (the audit log). */
const shownSecrets: string[] = [];

beforeAll(async () => {
  stack = await Stack.start({
    ...STACK_OPTIONS,
    // Quick erasure passes: the deletion page sees a request through to done.
    ingest: {
      httpAddress: "127.0.0.1:0",
      erasure: { intervalMs: 300, settleMs: 1_000, statusMaxAgeMs: 86_400_000 },
    },
  });
  base = `http://${stack.ingest.httpAddress}/console/`;
  context = await browser.newContext({ viewport: WIDE });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], {
    origin: `http://${stack.ingest.httpAddress}`,
  });
  page = await context.newPage();
  page.setDefaultTimeout(30_000);
  errors = watchErrors(page);
  page.on("request", (r) => requested.push(r.url()));
});

afterAll(async () => {
  await stack?.close();
});

const nav = (name: string) => page.getByRole("navigation").getByRole("link", { name, exact: true }).click();
const go = (path: string) => page.goto(new URL(path, base).toString());

/** Reloads until `selector` shows up (pages poll too, but a reload is quicker to wait on). */
async function reloadUntil(selector: string, timeoutMs = 45_000): Promise<void> {
  await until(
    async () => {
      if (await page.locator(selector).first().isVisible()) return true;
      await page.reload();
      await page.locator("main").waitFor();
      return false;
    },
    { timeout: timeoutMs, interval: 500, message: `${selector} on the page` },
  );
}

async function track(event: string): Promise<string> {
  const r = await source.client.track({ userId: "u-1", event, properties: { plan: "pro" } });
  return r.messageId;
}

/** Opens the new-destination form from the overview, with its id, name and URL filled in. */
async function newDestination(id: string, name: string, url: string): Promise<void> {
  await nav("Overview");
  await page.getByRole("link", { name: "New destination" }).click();
  await page.locator("input[name=id]").fill(id);
  await page.locator("input[name=name]").fill(name);
  await page.locator("textarea[name=urls]").fill(url);
}

/** Saves the destination page's settings and reads back what the server stored. */
async function saveSettings(id: string): Promise<Destination> {
  await page.getByRole("button", { name: "Save settings" }).click();
  await page.getByText("Saved.").waitFor();
  return (await stack.admin.getDestination({ id })).destination!;
}

async function expectNoSidewaysScroll(name: string): Promise<void> {
  expect(await screenshots(page, name), `${name} scrolls sideways at 390 px`).toBeLessThanOrEqual(1);
}

describe("web console", () => {
  it("signs in with the admin token, kept in session storage and never in a URL", async () => {
    await go("./");
    await page.locator("input[name=token]").fill("not-the-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    expect(await page.locator(".field-error").textContent()).toBe("invalid admin token");
    await expectNoSidewaysScroll("sign-in");

    await page.locator("input[name=token]").fill(STACK_ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    expect(await page.evaluate('sessionStorage.getItem("hookpost.adminToken")')).toBe(STACK_ADMIN_TOKEN);
    expect(page.url()).not.toContain(STACK_ADMIN_TOKEN);
    // Not even with a signed-in session does the overview go blank without destinations.
    await page.getByText("No destination yet").waitFor();
  });

  it("creates a source: field errors next to the field, the write key shown once with a copy button", async () => {
    await nav("Sources");
    const form = page.locator("[data-testid=new-source]");
    await form.getByRole("button", { name: "Create source" }).click();
    const nameError = form.locator('.field-error[data-field="name"]');
    expect(await nameError.textContent()).toMatch(/required|empty/);

    await form.locator("input[name=name]").fill("Web shop");
    await form.locator("input[name=id]").fill("web");
    await form.getByRole("button", { name: "Create source" }).click();
    const key = (await page.locator("[data-testid=shown-once]").textContent()) ?? "";
    expect(key.length).toBeGreaterThan(20);
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByRole("button", { name: "Copied" }).waitFor();
    expect(await page.evaluate("navigator.clipboard.readText()")).toBe(key);
    await page.locator('tr[data-source="web"]').waitFor();
    await expectNoSidewaysScroll("sources");

    // A second source: rotate its key (a new one is shown), then delete it (asks once more).
    await form.locator("input[name=name]").fill("Temporary");
    await form.locator("input[name=id]").fill("temp");
    await form.getByRole("button", { name: "Create source" }).click();
    const row = page.locator('tr[data-source="temp"]');
    await row.waitFor();
    const tempKey = await page.locator("[data-testid=shown-once]").textContent();
    expect(await row.locator("[data-testid=allowed-origins]").textContent()).toBe("any web site");
    // Allowed origins are set with the CLI or the API; the list shows them (read on its next load).
    await stack.admin.updateSource({
      source: { id: "temp", allowedOrigins: ["https://shop.example.com", "https://*.example.org"] },
      updateMask: { paths: ["allowed_origins"] },
    });
    await row.getByRole("button", { name: "Rotate key" }).click();
    await page.getByText('New write key of "Temporary"').waitFor();
    await until(
      async () =>
        (await row.locator("[data-testid=allowed-origins]").textContent()) ===
        "https://shop.example.comhttps://*.example.org",
      { message: "the source's allowed origins listed" },
    );
    await expectNoSidewaysScroll("sources-origins");
    const rotated = await page.locator("[data-testid=shown-once]").textContent();
    expect(rotated).not.toBe(tempKey);
    await row.getByRole("button", { name: "Delete" }).click();
    await row.getByRole("button", { name: "Really delete" }).click();
    await row.waitFor({ state: "detached" });
    expect((await stack.admin.listSources({})).sources.map((s) => s.id)).toEqual(["web"]);

    source = { writeKey: key, client: ingestClient(stack.ingest.address, key) };
    shownSecrets.push(key);
  });

  it("creates a destination through the UI and delivers calls sent over gRPC", async () => {
    await newDestination("hook", "Customer hook", "ftp://example.com/hook");
    await page.locator("textarea[name=headers]").fill("X-Tenant: acme");
    await page.getByRole("button", { name: "Create destination" }).click();
    const urlError = page.locator('.field-error[data-field="destination.urls"]');
    expect(await urlError.textContent()).toContain("scheme");
    await expectNoSidewaysScroll("new-destination-field-error");

    await page.locator("textarea[name=urls]").fill(stack.receiver.url());
    await page.getByRole("button", { name: "Create destination" }).click();
    await page.waitForURL(/\/console\/destinations\/hook$/);
    await page.getByRole("heading", { name: /Customer hook/ }).waitFor();
    // Nothing tried yet: it says so rather than "Delivering" (issue 28).
    await page
      .locator('[data-testid=delivery-state][data-status="idle"]')
      .getByText("no attempt yet")
      .waitFor();

    await stack.waitForDestination("hook");
    for (const event of ["Signed Up", "Order Completed", "Logged In"]) await track(event);
    const received = await stack.receiver.waitFor(3, 30_000);
    expect(received.every((r) => r.headers["x-tenant"] === "acme")).toBe(true);
  });

  it("shows the deliveries in the attempt log, each opening to its request and response", async () => {
    await go("destinations/hook");
    await reloadUntil("[data-testid=attempts] .attempt:nth-child(3)");
    // Delivery order is not guaranteed: each of the three opens to its own call's request.
    const events: string[] = [];
    for (let i = 0; i < 3; i++) {
      const attempt = page.locator("[data-testid=attempts] .attempt").nth(i);
      expect(await attempt.getAttribute("data-outcome")).toBe("SUCCESS");
      await attempt.locator("summary").click();
      const body = (await attempt.locator("[data-testid=request-body]").textContent()) ?? "";
      events.push(JSON.parse(body).event);
      expect(await attempt.locator("dd").nth(2).textContent()).toMatch(/^\d+ ms$/);
    }
    expect(events.sort()).toEqual(["Logged In", "Order Completed", "Signed Up"]);
    await expectNoSidewaysScroll("destination-attempts");
  });

  let failedId = "";
  it("makes the receiver fail: the call becomes a dead letter with its reason", async () => {
    stack.receiver.respond = () => ({ status: 422, body: "missing field: plan_id" });
    failedId = await track("Broken Event");
    await stack.receiver.waitFor(4, 30_000);
    await go("dead-letters");
    await reloadUntil(`tr[data-message="${failedId}"]`);
    const row = page.locator(`tr[data-message="${failedId}"]`);
    expect(await row.textContent()).toContain("hook");
    await expectNoSidewaysScroll("dead-letters");
  });

  it("shows the failure reason and the state change on the overview, and the message timeline", async () => {
    await go("./");
    await reloadUntil('tr[data-destination="hook"] [data-col="state"] .badge-bad');
    expect(await page.locator('tr[data-destination="hook"] [data-col="state"]').textContent()).toBe(
      "failing",
    );
    expect(
      await page.locator('tr[data-destination="hook"] [data-col="last-failure"]').textContent(),
    ).toContain("422");
    await page.locator("[data-testid=deliveries-chart] canvas").waitFor();
    // 422 is not retried: the breaker stays closed.
    expect(await page.locator('tr[data-destination="hook"] [data-col="breaker"]').textContent()).toBe(
      "closed",
    );
    await expectNoSidewaysScroll("overview-failing");

    // A dispatcher replica reports the breaker open (as a dispatcher's attempt log does).
    const replica = new AttemptLog(stack.nc, {
      enabled: true,
      bodies: false,
      logger: quietLogger,
      health: { replica: "console-replica", everyMs: 50 },
    });
    replica.breaker("hook", { state: "open", until: Date.now() + 10 * 60_000, failures: 5 });
    await reloadUntil('tr[data-destination="hook"] [data-col="breaker"] .badge-bad');
    expect(await page.locator('tr[data-destination="hook"] [data-col="breaker"]').textContent()).toMatch(
      /^openuntil in (9|10) min$/,
    );
    await replica.close();

    await go("destinations/hook");
    // The attempt log has the failure (a reload clears the filter, so wait before filtering).
    await reloadUntil(`[data-testid=attempts] .attempt[data-message="${failedId}"]`);
    await page.getByText("Failed only").click();
    // The filtered list replaces the full one: only the failed attempt is left.
    const failed = page.locator("[data-testid=attempts] .attempt");
    await expect.poll(() => failed.count(), { timeout: 30_000 }).toBe(1);
    expect(await failed.first().getAttribute("data-message")).toBe(failedId);
    await failed.first().locator("summary").click();
    expect(await failed.first().locator("summary").textContent()).toContain("422");
    expect(await failed.first().locator("[data-testid=response-body]").textContent()).toBe(
      "missing field: plan_id",
    );

    await go(`messages/${failedId}`);
    await page.locator("[data-testid=message-timeline]").waitFor();
    expect(
      await page.locator('[data-testid=message-timeline] [data-destination="hook"]').textContent(),
    ).toContain("dead letter");
    await expectNoSidewaysScroll("message");
  });

  it("replays a selected dead letter and sees it delivered", async () => {
    stack.receiver.respond = () => ({ status: 200 });
    await go("dead-letters");
    const row = page.locator(`tr[data-message="${failedId}"]`);
    await row.locator("input[type=checkbox]").check();
    await page.getByRole("button", { name: "Replay selected (1)" }).click();
    expect(await page.locator("[data-testid=replay-result]").textContent()).toBe("Replayed 1 dead letter.");
    const received = await stack.receiver.waitFor(5, 30_000);
    expect(received[4]!.headers["idempotency-key"]).toBe(failedId);
    await row.waitFor({ state: "detached" });
  });

  it("replays every dead letter of a time range (destination required, shown at the field)", async () => {
    stack.receiver.respond = () => ({ status: 400, body: "rejected" });
    const ids = [await track("Late 1"), await track("Late 2")];
    await stack.receiver.waitFor(7, 30_000);
    stack.receiver.respond = () => ({ status: 200 });
    await go("dead-letters");
    await reloadUntil(`tr[data-message="${ids[1]}"]`);
    await reloadUntil(`tr[data-message="${ids[0]}"]`);

    const form = page.locator("[data-testid=replay-range]");
    await form.getByRole("button", { name: "Replay range" }).click();
    expect(await form.locator('.field-error[data-field="destination_id"]').textContent()).toMatch(
      /required|empty/,
    );

    await form.locator("select[name=destination]").selectOption("hook");
    const since = new Date(Date.now() - 10 * 60_000);
    const local = new Date(since.getTime() - since.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await form.locator("input[name=since]").fill(local);
    await form.getByRole("button", { name: "Replay range" }).click();
    expect(await page.locator("[data-testid=replay-result]").textContent()).toBe("Replayed 2 dead letters.");
    const received = await stack.receiver.waitFor(9, 30_000);
    expect(new Set(received.slice(7).map((r) => r.headers["idempotency-key"]))).toEqual(new Set(ids));
  });

  it("edits settings, pauses and resumes delivery", async () => {
    await go("destinations/hook");
    await page.locator("input[name=name]").fill("Customer hook (EU)");
    await page.locator("textarea[name=headers]").fill("X-Tenant acme");
    await page.getByRole("button", { name: "Save settings" }).click();
    expect(await page.locator('.field-error[data-field="destination.headers"]').textContent()).toContain(
      "token",
    );
    await page.locator("textarea[name=headers]").fill("X-Tenant: acme-eu");
    let d = await saveSettings("hook");
    expect(d.name).toBe("Customer hook (EU)");
    expect(d.headers).toEqual({ "X-Tenant": "acme-eu" });

    await page.getByRole("button", { name: "Pause delivery" }).click();
    await page.getByRole("button", { name: "Resume delivery" }).waitFor();
    expect(await page.locator("[data-testid=delivery-state]").textContent()).toContain("Paused");
    d = (await stack.admin.getDestination({ id: "hook" })).destination!;
    expect(d.enabled).toBe(false);
    await page.getByRole("button", { name: "Resume delivery" }).click();
    await page.getByRole("button", { name: "Pause delivery" }).waitFor();
    expect((await stack.admin.getDestination({ id: "hook" })).destination!.enabled).toBe(true);
  });

  it("rotates the shared secret: the new one is shown once", async () => {
    await go("destinations/hook");
    const shown = page.locator("[data-testid=shown-once]");
    await page.getByRole("button", { name: "Rotate secret" }).click();
    const first = (await shown.textContent()) ?? "";
    expect(first.length).toBeGreaterThan(10);
    expect((await stack.admin.getDestination({ id: "hook" })).destination!.sharedSecretSet).toBe(true);
    // Rotating again: the first secret keeps signing beside the new one for a while, and the page says so.
    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByText("The previous secret signs too until").waitFor();
    expect(await shown.textContent()).not.toBe(first);
    shownSecrets.push(first, (await shown.textContent()) ?? "");
  });

  it("shows who changed what in the audit log, never a secret or header value", async () => {
    await nav("Audit log");
    const records = page.locator("[data-testid=audit-records] details");
    await records.first().waitFor();
    const rotations = page.locator('[data-testid=audit-records] details[data-action="RotateSecret"]');
    expect(await rotations.count()).toBe(2);
    expect(await records.first().getAttribute("data-action")).toBe("RotateSecret");
    // The settings change: header names shown, their values redacted, before → after.
    const edit = page
      .locator('[data-testid=audit-records] details[data-action="UpdateDestination"]')
      .filter({ hasText: "changed headers" });
    await edit.locator("summary").click();
    expect(await edit.locator("summary").textContent()).toMatch(/admin [0-9a-f]{8}/);
    expect(await edit.locator("[data-testid=after]").textContent()).toContain('"X-Tenant": "[redacted]"');
    await page.locator("input[name=resource]").fill("hook");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/\/console\/audit\?resource=hook$/);
    await page
      .locator('[data-testid=audit-records] details[data-action="CreateDestination"]')
      .first()
      .waitFor();
    expect(
      await page.locator('[data-testid=audit-records] details[data-action="CreateSource"]').count(),
    ).toBe(0);
    await expectNoSidewaysScroll("audit");
    const text = (await page.content()) + (await page.locator("main").innerText());
    for (const s of [...shownSecrets, "acme-eu", STACK_ADMIN_TOKEN]) expect(text).not.toContain(s);
  });

  it("an Ed25519-signed destination shows its public key, and after a rotation both; never a private key", async () => {
    await newDestination("ed-hook", "Ed25519 hook", stack.receiver.url("/ed-hook"));
    await page.locator("select[name=signing]").selectOption({ label: "Standard Webhooks, Ed25519" });
    await page.getByRole("button", { name: "Create destination" }).click();
    await page.waitForURL(/\/console\/destinations\/ed-hook$/);
    const keys = page.locator("[data-testid=public-key]");
    await keys.first().waitFor();
    const d = (await stack.admin.getDestination({ id: "ed-hook" })).destination!;
    expect(await keys.allTextContents()).toEqual(d.signingPublicKeys);
    expect(d.signingPublicKeys[0]).toMatch(/^whpk_/);
    await expectNoSidewaysScroll("destination-ed25519");
    // The form shows the mode it has, so saving other settings keeps it (and its key).
    expect(await page.locator("select[name=signing] option:checked").textContent()).toBe(
      "Standard Webhooks, Ed25519",
    );
    await page.locator("input[name=name]").fill("Ed25519 hook (EU)");
    const saved = await saveSettings("ed-hook");
    expect([saved.name, saved.signing]).toEqual(["Ed25519 hook (EU)", Signing.STANDARD_WEBHOOKS_ED25519]);
    expect(saved.signingPublicKeys).toEqual(d.signingPublicKeys);

    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByText("The previous secret signs too until").waitFor();
    await until(async () => (await keys.count()) === 2, { message: "both public keys on the page" });
    const rotated = (await stack.admin.getDestination({ id: "ed-hook" })).destination!.signingPublicKeys;
    expect(await keys.allTextContents()).toEqual(rotated);
    expect(rotated[1]).toBe(d.signingPublicKeys[0]);
    // Nothing secret to show once: the private key never leaves the server.
    expect(await page.locator("[data-testid=shown-once]").count()).toBe(0);
    expect(await page.content()).not.toMatch(/whsk_[A-Za-z0-9+/]{8}/);
  });

  /** Runs the dry run beside the destination form; its new outcome (the panel counts its runs). */
  async function dryRun(outcome: "requests" | "filtered" | "invalid" | "error") {
    const panel = page.locator("[data-testid=dry-run]");
    const runs = Number(await panel.getAttribute("data-runs"));
    await panel.getByRole("button", { name: "Dry run" }).click();
    const result = panel.locator(`[data-testid=dry-run-result][data-run="${runs + 1}"]`);
    await result.waitFor();
    expect(await result.getAttribute("data-outcome")).toBe(outcome);
    return result;
  }

  it("creates a destination with a mapping and PUT through the form; the dry run beside it shows the mapped request, as delivered", async () => {
    stack.receiver.respond = () => ({ status: 200 });
    await newDestination("crm", "CRM contacts", stack.receiver.url("/contacts/{{ userId }}"));
    await page.locator("select[name=method]").selectOption({ label: "PUT" });
    const mapping = '{ "id": userId, "what": event, "plan": properties.plan, "via": $sourceId }';
    await page.locator("textarea[name=mapping]").fill(mapping);

    // Before anything is saved: the form is tried as a draft (no secret: unsigned).
    let result = await dryRun("requests");
    expect(await result.locator("[data-testid=dry-run-note]").textContent()).toContain("as a draft");
    expect(await result.locator("[data-testid=dry-run-method]").textContent()).toBe("PUT");
    expect(await result.locator("[data-testid=dry-run-url]").textContent()).toBe(
      stack.receiver.url("/contacts/u-1"),
    );
    expect(JSON.parse((await result.locator("[data-testid=dry-run-body]").textContent()) ?? "")).toEqual({
      id: "u-1",
      what: "Order Completed",
      plan: "pro",
      via: "web",
    });
    expect(await result.locator("[data-testid=dry-run-headers]").textContent()).not.toMatch(/signature/i);
    expect((await stack.admin.listDestinations({})).destinations.map((x) => x.id)).not.toContain("crm");

    await page.getByRole("button", { name: "Create destination" }).click();
    await page.waitForURL(/\/console\/destinations\/crm$/);
    const shaping = page.locator("[data-testid=shaping]");
    expect(await shaping.locator("[data-testid=shaping-method]").textContent()).toBe("PUT");
    expect(await shaping.locator("[data-testid=shaping-mapping]").textContent()).toBe(mapping);
    expect(await page.locator("select[name=method] option:checked").textContent()).toBe("PUT");

    // Unchanged form: the saved destination itself, whose request a real delivery sends.
    await page
      .locator("textarea[name=call-json]")
      .fill('{"type":"track","userId":"u-7","event":"Plan Chosen","properties":{"plan":"team"}}');
    result = await dryRun("requests");
    expect(await result.locator("[data-testid=dry-run-note]").textContent()).toContain(
      "The saved destination",
    );
    const previewed = (await result.locator("[data-testid=dry-run-body]").textContent()) ?? "";
    await expectNoSidewaysScroll("destination-dry-run");
    await stack.waitForDestination("crm");
    await source.client.track({ userId: "u-7", event: "Plan Chosen", properties: { plan: "team" } });
    const got = await until(() => stack.receiver.requests.find((r) => r.url === "/contacts/u-7"), {
      timeout: 30_000,
      message: "the mapped call at the receiver",
    });
    expect(got.method).toBe("PUT");
    expect(got.body.toString()).toBe(previewed);
  });

  it("an invalid mapping is refused with the server's error and its position, at the field and in the dry run", async () => {
    await go("destinations/crm");
    await page.locator("textarea[name=mapping]").fill('{ "id": userId,');
    await page.getByRole("button", { name: "Save settings" }).click();
    const fieldError = page.locator('.field-error[data-field="destination.mapping"]');
    expect(await fieldError.textContent()).toMatch(/position \d+/);
    const result = await dryRun("invalid");
    expect(await result.textContent()).toMatch(/destination\.mapping: position \d+/);
    expect((await stack.admin.getDestination({ id: "crm" })).destination!.mapping).toContain("$sourceId");
    // One that compiles but renders nothing for this call: what a delivery would record instead.
    await page.locator("textarea[name=mapping]").fill("traits.email");
    expect(await (await dryRun("error")).textContent()).toContain(
      "not sent: mapping failed: it returned nothing for this call",
    );

    // A duration the browser cannot read is shown at its field, and nothing is sent.
    await go("destinations/crm");
    await page.locator("input[name=retry-delays]").fill("10s, soon");
    await page.getByRole("button", { name: "Save settings" }).click();
    expect(await page.locator('.field-error[data-field="destination.retry.delays"]').textContent()).toContain(
      'not a duration: "soon"',
    );
    expect((await stack.admin.getDestination({ id: "crm" })).destination!.retry).toBeUndefined();
  });

  it("a call the filter refuses shows filtered in the dry run; the saved filter and retries show on the page", async () => {
    await go("destinations/crm");
    await page.locator("input[name=filter-type][value=identify]").check();
    let result = await dryRun("filtered");
    expect(await result.textContent()).toContain("filtered: filter (type)");
    await page.locator("input[name=filter-type][value=identify]").uncheck();
    await page.locator("input[name=filter-type][value=track]").check();
    await page.locator("textarea[name=filter-events]").fill("Signed Up");
    result = await dryRun("filtered");
    expect(await result.textContent()).toContain("filtered: filter (event)");
    await page
      .locator("textarea[name=call-json]")
      .fill('{"type":"track","userId":"u-1","event":"Signed Up"}');
    result = await dryRun("requests");
    expect(await result.locator("[data-testid=dry-run-url]").textContent()).toBe(
      stack.receiver.url("/contacts/u-1"),
    );

    await page.locator("input[name=retry-window]").fill("2h");
    await page.locator("input[name=retry-delays]").fill("10s, 1m");
    const d = await saveSettings("crm");
    expect([d.filter?.types, d.filter?.events]).toEqual([["track"], ["Signed Up"]]);
    expect(d.retry?.window?.seconds).toBe(7200n);
    expect(d.retry?.delays.map((x) => x.seconds)).toEqual([10n, 60n]);
    expect(d.method).toBe(HttpMethod.PUT);
    const shaping = page.locator("[data-testid=shaping]");
    expect(await shaping.locator("[data-testid=shaping-filter]").textContent()).toContain(
      'Track events: "Signed Up"',
    );
    expect(await shaping.locator("[data-testid=shaping-retry]").textContent()).toBe(
      "for 2h, waiting 10s, 1m (the last repeats)",
    );
    // The form shows what was saved, so saving again changes nothing.
    expect(await page.locator("input[name=retry-delays]").inputValue()).toBe("10s, 1m");
    expect(await page.locator("input[name=filter-type][value=track]").isChecked()).toBe(true);
  });

  it("creates a fan-out destination that sends batches through the form; the dry run shows the array and the page both settings", async () => {
    await newDestination(
      "warehouse",
      "Warehouse loader",
      `${stack.receiver.url("/load-a")}\n${stack.receiver.url("/load-b")}`,
    );
    await page
      .locator("select[name=delivery-mode]")
      .selectOption({ label: "Fan-out: every URL gets every call" });
    await page.locator("input[name=batching]").check();
    await page.locator("input[name=batch-calls]").fill("50");
    await page.locator("input[name=batch-wait]").fill("2s");
    const result = await dryRun("requests");
    // A call alone is a batch of one, to each URL.
    const bodies = await result.locator("[data-testid=dry-run-body]").allTextContents();
    expect(bodies).toHaveLength(2);
    for (const b of bodies) expect(JSON.parse(b)).toEqual([expect.objectContaining({ type: "track" })]);
    await page.getByRole("button", { name: "Create destination" }).click();
    await page.waitForURL(/\/console\/destinations\/warehouse$/);
    const shaping = page.locator("[data-testid=shaping]");
    expect(await shaping.locator("[data-testid=shaping-mode]").textContent()).toContain(
      "every URL gets every call",
    );
    expect(await shaping.locator("[data-testid=shaping-batching]").textContent()).toBe(
      "up to 50 calls or 524288 bytes per request, waiting at most 2s for more",
    );
    const d = (await stack.admin.getDestination({ id: "warehouse" })).destination!;
    expect([d.deliveryMode, d.batching?.maxCalls, d.batching?.maxWait?.seconds]).toEqual([
      DeliveryMode.FAN_OUT,
      50,
      2n,
    ]);
    // The form shows what was saved.
    expect(await page.locator("input[name=batching]").isChecked()).toBe(true);
    expect(await page.locator("input[name=batch-calls]").inputValue()).toBe("50");
    await expectNoSidewaysScroll("destination-fan-out-batching");
  });

  it("asks which source when two sources sent the same message id, then shows that source's call", async () => {
    stack.receiver.respond = () => ({ status: 200 });
    const other = await stack.source("second source");
    await stack.destination({ id: "hook-b", sourceIds: [other.id] });
    const messageId = "console-shared-id";
    await source.client.track({ messageId, userId: "u-1", event: "From the first" });
    await other.client.track({ messageId, userId: "u-2", event: "From the second" });
    await go(`messages/${messageId}`);
    await reloadUntil(`[data-testid=message-sources] a[href*="source=${other.id}"]`);
    await page.locator(`[data-testid=message-sources] a[href*="source=${other.id}"]`).click();
    await page.waitForURL(new RegExp(`/console/messages/${messageId}\\?source=${other.id}$`));
    await page.locator("[data-testid=message-timeline]").waitFor();
    const text = await page.locator("[data-testid=message-timeline]").textContent();
    expect(text).toContain(other.id);
    expect(text).toContain("From the second");
    expect(text).not.toContain("From the first");
  });

  it("looks a deletion request up by id: notified sources, erased counts and passes until done", async () => {
    await source.client.track({ userId: "u-forget", event: "Soon Forgotten" });
    const ingestAdmin = createClient(IngestService, stack.ingest.address, {
      metadata: adminMetadata(STACK_ADMIN_TOKEN),
    });
    const { requestId } = await ingestAdmin.delete({ userId: "u-forget" }).finally(() => ingestAdmin.close());

    await nav("Deletions");
    await page.getByText("Enter the request id").waitFor();
    await page.locator("input[name=request]").fill(requestId);
    await page.getByRole("button", { name: "Look up" }).click();
    await page.waitForURL(new RegExp(`/console/deletions/${requestId}$`));
    // The page asks again while erasing: it turns done by itself.
    const status = page.locator('[data-testid=deletion-status][data-done="true"]');
    await status.waitFor({ timeout: 30_000 });
    const shown = await stack.admin.getDeletion({ requestId });
    expect(await status.locator("[data-testid=notified-sources]").textContent()).toBe("web");
    expect(await status.locator("[data-testid=passes]").textContent()).toBe(String(shown.passes));
    expect(await status.locator("[data-testid=done-time]").textContent()).not.toBe("not yet");
    const erased = async (key: string) =>
      status.locator(`[data-testid=erased] tr[data-erased="${key}"] td`).textContent();
    expect(await erased("attempt-records")).toBe(String(shown.erasedAttemptRecords));
    expect(await erased("dead-letters")).toBe(String(shown.erasedDeadLetters));
    expect(await erased("pending-calls")).toBe(String(shown.erasedPendingCalls));
    expect(await erased("memberships")).toBe(String(shown.erasedMemberships));
    expect(await status.textContent()).toContain(requestId);
    await expectNoSidewaysScroll("deletion");

    // Unknown and malformed ids: a readable notice, never a blank page.
    await go("deletions/del_unknown");
    expect(await page.locator('.notice[data-code="NotFound"]').textContent()).toContain("del_unknown");
    await go("deletions/not-a-request");
    expect(await page.locator('.notice[data-code="InvalidArgument"]').textContent()).toContain(
      "not a deletion request id",
    );
  });

  it("sends a test call from the destination page and shows its attempt", async () => {
    await go("destinations/hook");
    await page.getByRole("button", { name: "Send test call" }).click();
    const result = page.locator("[data-testid=test-call]");
    await result.waitFor();
    const text = (await result.textContent()) ?? "";
    expect(text).toMatch(/Test call test_\S+: delivered/);
    const messageId = /test_[A-Za-z0-9_-]+/.exec(text)![0];
    // The same attempt the admin API recorded, shown once.
    const recorded = await stack.admin.listAttempts({ destinationId: "hook", messageId });
    expect(recorded.attempts).toHaveLength(1);
    expect(await result.locator("details.attempt").count()).toBe(1);
  });

  it("renders every page without errors, the message page too (search by id)", async () => {
    await go("messages");
    await page.locator("input[name=message]").fill(failedId);
    await page.getByRole("button", { name: "Find" }).click();
    await page.waitForURL(new RegExp(`/console/messages/${failedId}$`));
    // Either the timeline or a readable notice (when the server lacks GetMessage): never blank.
    await page.locator("[data-testid=message-timeline], .notice").first().waitFor();
    await expectNoSidewaysScroll("message-search");
    await go("./");
    await page.locator("[data-testid=deliveries-chart], .notice").first().waitFor();
    await page.locator('tr[data-destination="hook"]').waitFor();
    await expectNoSidewaysScroll("overview");
    await go("destinations/hook");
    await page.getByRole("heading", { name: /Customer hook/ }).waitFor();
    await expectNoSidewaysScroll("destination");
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    expect(await page.evaluate('sessionStorage.getItem("hookpost.adminToken")')).toBeNull();

    expect(errors).toEqual([]);
    expect(requested.filter((u) => u.includes(STACK_ADMIN_TOKEN))).toEqual([]);
  });
});
