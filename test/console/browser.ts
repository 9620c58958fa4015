import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
export const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-quic",
  "--disable-sync",
];

export const SCREENSHOTS = resolve("test-results/console");

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
  }
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true, timeout: 60_000 });
}

/** Chromium for the enclosing file or describe block (see useFixture): launched before its tests, closed after them. */
export function useChromium(): Browser {
  return useFixture(launchChromium, "Chromium");
}

/**
 * Collects what would show a broken page: uncaught errors and console errors (a
 * Content-Security-Policy violation is one).
 */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(`pageerror: ${err.message}`));
  page.on("console", (msg) => {
    // Failed API calls are shown on the page and also logged by Chromium as failed resources.
    if (msg.type() === "error" && !/Failed to load resource/.test(msg.text())) errors.push(msg.text());
  });
  return errors;
}

export const WIDE = { width: 1280, height: 900 };
export const NARROW = { width: 390, height: 844 };

/**
 * Screenshots the page at 1280 and at 390 px wide (test-results/console/<name>-<width>.png)
 * and returns how far the narrow page overflows sideways (0 when it fits).
 */
export async function screenshots(page: Page, name: string): Promise<number> {
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.setViewportSize(WIDE);
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-1280.png`), fullPage: true });
  await page.setViewportSize(NARROW);
  const measure = async () =>
    (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
  // Charts follow a resize on a later frame (ResizeObserver): give the layout a moment to settle;
  // an overflow that lasts is a real one.
  let overflow = await measure();
  if (overflow > 1) {
    overflow = await until(
      async () => {
        overflow = await measure();
        return overflow <= 1;
      },
      { timeout: 3000, interval: 100, message: "the layout to fit the narrow viewport" },
    ).then(
      () => overflow,
      () => overflow, // it lasts: a real overflow, reported by the caller
    );
  }
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-390.png`), fullPage: true });
  await page.setViewportSize(WIDE);
  return overflow;
}
