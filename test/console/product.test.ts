import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { launchChromium, WIDE, watchErrors } from "./browser.js";

/**
 * The console as a product (issue 28), in a real Chromium against a real stack: an overview
 * that puts health first, a destination page never more hopeful than its last attempts, a
 * message page with a timeline per destination, empty and error states, a 390 px phone.
 */

let stack: Stack;
let browser: Browser;
let page: Page;
let base: string;
let errors: string[];
let web: Awaited<ReturnType<Stack["source"]>>;

beforeAll(async () => {
  stack = await Stack.start({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0" } });
  // Each destination has its own path at the one receiver; the path decides the answer.
  stack.receiver.respond = (r) =>
    r.url.startsWith("/down") ? { status: 503, body: "upstream is down" } : { status: 200 };
  base = `http://${stack.ingest.httpAddress}/console/`;
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: WIDE })).newPage();
  page.setDefaultTimeout(30_000);
  errors = watchErrors(page);
  await page.goto(new URL("sign-in", base).toString());
  await page.locator("input[name=token]").fill(STACK_ADMIN_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Overview" }).waitFor();
  web = await stack.source("Web shop");
});

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

const go = (path: string) => page.goto(new URL(path, base).toString());

describe("the console as a product", () => {
  it("a destination whose every attempt fails does not say 'Delivering': it says failing, and why", async () => {
    await stack.destination({
      id: "down",
      name: "Down hook",
      sourceIds: [web.id],
      urls: [stack.receiver.url("/down")],
    });
    await web.client.track({ userId: "u-1", event: "Order Completed" });
    await until(() => stack.receiver.requests.filter((r) => r.url === "/down").length >= 2, {
      timeout: 30_000,
      message: "two failed attempts at /down",
    });
    await go("destinations/down");
    await page.locator("[data-testid=attempts] .attempt").first().waitFor();
    const state = page.locator("[data-testid=delivery-state]");
    expect(await state.textContent()).not.toContain("Delivering");
    expect(await state.textContent()).toMatch(/failing/i);
    expect(await state.textContent()).toContain("503");
  });

  it("looking up an unknown message id shows that it is not found, not the previous message", async () => {
    const { messageId } = await web.client.track({ userId: "u-2", event: "Signed Up" });
    await go(`messages/${messageId}`);
    await until(
      async () => {
        if (await page.locator("[data-testid=message-timeline]").isVisible()) return true;
        await page.reload();
        return false;
      },
      { timeout: 30_000, interval: 500, message: "the message's timeline" },
    );
    await page.locator("input[name=message]").fill("no-such-message");
    await page.getByRole("button", { name: "Find" }).click();
    await page.waitForURL(/\/console\/messages\/no-such-message$/);
    await page.locator('[data-testid=not-found], .notice[data-code="NotFound"]').first().waitFor();
    expect(await page.locator("[data-testid=message-timeline]").count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
