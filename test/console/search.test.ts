import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { screenshots, useChromium, WIDE, watchErrors } from "./browser.js";

/**
 * The console's Search page in a real Chromium against a real stack (issue 28): the log's
 * retention, then filters a person types (status, event, user, HTTP status, destination), the
 * results newest first with their details, older pages, empty and error states, at 390 px too.
 */

let stack: Stack;
const browser = useChromium();
let page: Page;
let base: string;
let errors: string[];
let failing: Receiver;
const sent: { order: string[]; signup?: string } = { order: [] };
/** Calls sent: more than one page (50) of entries. */
const CALLS = 30;

beforeAll(async () => {
  stack = await Stack.start({
    ...STACK_OPTIONS,
    // Failed deliveries retry far apart: each stays one failed attempt while the test looks (the
    // first retry comes after 5 to 10 min; with 60 s it could come after 30 s, within a loaded run).
    dispatcher: { ...STACK_OPTIONS.dispatcher, retryBaseDelayMs: 600_000 },
    ingest: { httpAddress: "127.0.0.1:0" },
  });
  failing = await Receiver.http();
  failing.respond = () => ({ status: 503, body: '{"error":"maintenance"}' });
  const src = await stack.source("Shop");
  await stack.destination({ id: "crm", name: "CRM", sourceIds: [src.id] });
  // Only sign-ups go to billing (its breaker never opens here): orders are filtered there.
  await stack.destination({
    id: "billing",
    name: "Billing",
    sourceIds: [src.id],
    urls: [failing.url()],
    filter: { events: ["Signed Up"] },
  });
  // Every call delivered to crm; at billing the orders filtered and the sign-up failed: 62 entries
  // (a page may end early: all pages).
  const count = async () => {
    let n = 0;
    let pageToken = "";
    do {
      const page = await stack.admin.searchAttempts({ pageSize: 1000, pageToken });
      n += page.entries.length;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    return n;
  };
  for (let i = 0; i < CALLS; i++) {
    sent.order.push((await src.client.track({ userId: `u-${i}`, event: "Order Completed" })).messageId);
  }
  // The sign-up goes once every order is in the log, so that its entries are the newest: its user
  // and the orders' users are others, whose deliveries could otherwise end in any order.
  await until(async () => (await count()) >= 2 * CALLS, {
    timeout: 30_000,
    message: "every order in the log",
  });
  sent.signup = (await src.client.track({ userId: "alice", event: "Signed Up" })).messageId;
  await until(async () => (await count()) >= 2 * (CALLS + 1), {
    timeout: 30_000,
    message: "every attempt in the log",
  });
  base = `http://${stack.ingest.httpAddress}/console/`;
  page = await (await browser.newContext({ viewport: WIDE })).newPage();
  page.setDefaultTimeout(30_000);
  errors = watchErrors(page);
  await page.goto(base);
  await page.locator("input[name=token]").fill(STACK_ADMIN_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Overview" }).waitFor();
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await failing?.close();
});

const entries = () => page.locator("[data-testid=search-results] details.search-entry");

async function search(fill: (form: ReturnType<Page["locator"]>) => Promise<void>): Promise<void> {
  const form = page.locator("[data-testid=search-filters]");
  await fill(form);
  await form.getByRole("button", { name: "Search" }).click();
}

describe("console search", () => {
  it("shows the log's retention, and every entry newest first with older pages", async () => {
    await page.getByRole("navigation").getByRole("link", { name: "Search", exact: true }).click();
    await page.getByRole("heading", { name: "Search the attempt log" }).waitFor();
    const retention = page.locator("[data-testid=retention]");
    expect(await page.locator("[data-testid=retention-age]").textContent()).toBe("3 days");
    expect(await page.locator("[data-testid=retention-bytes]").textContent()).toBe("1.0 GiB");
    expect(await retention.textContent()).toMatch(
      /holds [\d.]+ (KiB|MiB) \([\d.]+ %\) in \d+ records, from /,
    );

    // A first page of 50 (followed at once when the server answered a shorter one in time).
    await until(async () => (await entries().count()) === 50, { message: "a page of 50" });
    // The newest first: the sign-up was sent last.
    expect(await entries().first().getAttribute("data-message")).toBe(sent.signup);
    await page.getByRole("button", { name: "Older entries" }).click();
    await until(async () => (await entries().count()) === 2 * (CALLS + 1), { message: "the older page" });
    expect(await page.getByRole("button", { name: "Older entries" }).count()).toBe(0);
    expect(await screenshots(page, "search"), "search scrolls sideways at 390 px").toBeLessThanOrEqual(1);
  });

  it("filters by status and event, and opens an entry to its attempt", async () => {
    await search(async (form) => {
      await form.getByLabel("failed").check();
      await form.locator("input[name=event]").fill("Signed Up");
    });
    await until(async () => page.url().includes("status=failed") && (await entries().count()) === 1, {
      message: "one failed sign-up",
    });
    expect(page.url()).toContain("event=Signed+Up");
    const row = entries().first();
    expect(await row.getAttribute("data-status")).toBe("FAILED");
    expect(await row.locator("summary").textContent()).toContain("503 failed");
    expect(await row.locator("summary").textContent()).toContain('track "Signed Up"');
    await row.locator("summary").click();
    expect(await row.locator("pre").textContent()).toBe('{"error":"maintenance"}');
    // The message link opens its timeline.
    await row.getByRole("link", { name: sent.signup! }).click();
    await page.getByTestId("message-timeline").waitFor();
    await page.goBack();
    await entries().first().waitFor();
    // The filters come back from the URL.
    expect(await page.locator("[data-testid=search-filters] input[name=event]").inputValue()).toBe(
      "Signed Up",
    );
  });

  it("filters by user, destination and HTTP status; says when nothing matches; refuses a bad status", async () => {
    await page.goto(new URL("search?user=u-7", base).toString());
    await until(async () => (await entries().count()) === 2, { message: "u-7's two entries" });
    expect(
      new Set(await entries().evaluateAll((els) => els.map((e) => e.getAttribute("data-message")))),
    ).toEqual(new Set([sent.order[7]]));

    await page.goto(new URL("search?destination=crm&http=2xx", base).toString());
    await until(async () => (await entries().count()) === CALLS + 1, { message: "crm's deliveries" });
    expect(
      new Set(await entries().evaluateAll((els) => els.map((e) => e.getAttribute("data-status")))),
    ).toEqual(new Set(["DELIVERED"]));

    await page.goto(new URL("search?destination=crm&status=dead-lettered", base).toString());
    await page.locator("[data-testid=search-empty]").waitFor();
    expect(await page.locator("[data-testid=search-empty]").textContent()).toBe(
      "Nothing in the attempt log matches these filters.",
    );

    // A time range: from an hour from now finds nothing; since 1 hour ago, everything of crm.
    const inAnHour = new Date(Date.now() + 3_600_000 - new Date().getTimezoneOffset() * 60_000);
    await page.goto(new URL("search?destination=crm", base).toString());
    await search(async (form) => {
      await form.locator("input[name=since-at]").fill(inAnHour.toISOString().slice(0, 16));
    });
    await page.locator("[data-testid=search-empty]").waitFor();
    expect(page.url()).toContain("since=");
    await page.goto(new URL("search?destination=crm&since=1h", base).toString());
    await until(async () => (await entries().count()) === CALLS + 1, {
      message: "crm's entries since 1 h",
    });
    expect(await page.locator("[data-testid=search-filters] select[name=since]").inputValue()).toBe("1h");

    await search(async (form) => {
      await form.locator("input[name=http]").fill("6xx");
    });
    expect(await page.locator('.field-error[data-field="http"]').textContent()).toBe(
      "an HTTP status (500) or a class (5xx)",
    );
    // An unknown destination is an error, never an empty, reassuring answer.
    await page.goto(new URL("search?destination=nope", base).toString());
    expect(await page.locator("[role=alert]").first().textContent()).toContain(
      'destination "nope" does not exist',
    );
    expect(errors).toEqual([]);
  });
});
