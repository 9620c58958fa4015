import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { screenshots, useChromium, WIDE, watchErrors } from "./browser.js";

/** The overview with 200 destinations: every row renders; how long it takes is printed, not asserted. */

const COUNT = 200;
let stack: Stack;
const browser = useChromium();
let page: Page;

beforeAll(async () => {
  // No dispatcher: only the configuration matters here (and 200 consumers would load the machine).
  stack = await Stack.start({ dispatchers: 0, ingest: { httpAddress: "127.0.0.1:0" } });
  const src = await stack.source("bulk");
  const ids = Array.from({ length: COUNT }, (_, i) => `dest-${String(i).padStart(3, "0")}`);
  for (let i = 0; i < ids.length; i += 20) {
    await Promise.all(
      ids.slice(i, i + 20).map((id) =>
        stack.admin.createDestination({
          destination: {
            id,
            name: `Customer ${id}`,
            sourceIds: [src.id],
            urls: [`https://${id}.example.com/hook`],
          },
        }),
      ),
    );
  }
  page = await (await browser.newContext({ viewport: WIDE })).newPage();
  page.setDefaultTimeout(60_000);
});

afterAll(async () => {
  await stack?.close();
});

describe("overview at scale", () => {
  it(`renders ${COUNT} destinations`, async () => {
    const errors = watchErrors(page);
    const base = `http://${stack.ingest.httpAddress}/console/`;
    await page.goto(`${base}sign-in`);
    await page.locator("input[name=token]").fill(STACK_ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("tr[data-destination]").first().waitFor();

    // A fresh load, timed from navigation to the last row in the DOM.
    const started = Date.now();
    await page.reload();
    await page.locator(`tr[data-destination="dest-${COUNT - 1}"]`).waitFor();
    const wallMs = Date.now() - started;
    expect(await page.locator("tr[data-destination]").count()).toBe(COUNT);
    const renderMs = await page.evaluate("document.documentElement.dataset.overviewRenderMs");
    console.log(
      `overview with ${COUNT} destinations: ${renderMs} ms to render once the data arrived, ` +
        `${wallMs} ms from reload to the last row`,
    );
    expect(Number(renderMs)).toBeGreaterThan(0);
    await screenshots(page, `overview-${COUNT}-destinations`);
    expect(errors).toEqual([]);
  });
});
