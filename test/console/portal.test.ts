import { createServer, type Server } from "node:http";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../e2e/helpers.js";
import {
  A,
  A_HOOK,
  B,
  B_HOOK,
  SHARED,
  startWorld,
  storeExpiredLink,
  type World,
} from "../portal/portal-world.js";
import { screenshots, useChromium, WIDE, watchErrors } from "./browser.js";

/**
 * The console opened with a portal link, in a real Chromium against a real stack: one source's
 * world (its destinations, attempts, dead letters, replay, secret rotation, test calls) and
 * nothing of the other source or of the operator's pages; a clear message when the link no
 * longer works; framed only by the sites CONSOLE_FRAME_ANCESTORS lists.
 */

let world: World;
const browser = useChromium();
let base: string;
/** Pages that embed the console in an iframe: one on a listed origin, one elsewhere. */
let listedSite: Server;
let otherSite: Server;
let listedOrigin: string;
let otherOrigin: string;

/** Serves one page that frames `src`. */
async function framingSite(port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const src = new URL(req.url ?? "/", "http://x").searchParams.get("src") ?? "";
    res.writeHead(200, { "content-type": "text/html" });
    res.end(
      `<!doctype html><title>customer app</title><iframe id="portal" width="1000" height="700" src="${src.replace(/"/g, "&quot;")}"></iframe>`,
    );
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()));
  return server;
}

beforeAll(async () => {
  const [listedPort, otherPort] = [await freePort(), await freePort()];
  listedOrigin = `http://127.0.0.1:${listedPort}`;
  otherOrigin = `http://127.0.0.1:${otherPort}`;
  listedSite = await framingSite(listedPort);
  otherSite = await framingSite(otherPort);
  world = await startWorld({ frameAncestors: [listedOrigin] });
  base = `http://${world.stack.ingest.httpAddress}/console/`;
}, 120_000);

afterAll(async () => {
  await world?.close();
  listedSite?.close();
  otherSite?.close();
});

interface Tab {
  context: BrowserContext;
  page: Page;
  errors: string[];
  /** Every URL and Referer the page sent. */
  sent: string[];
}

async function tab(): Promise<Tab> {
  const context = await browser.newContext({ viewport: WIDE });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  const sent: string[] = [];
  page.on("request", async (r) => {
    sent.push(r.url());
    const referer = (await r.allHeaders().catch(() => ({}) as Record<string, string>)).referer;
    if (referer) sent.push(referer);
  });
  return { context, page, errors: watchErrors(page), sent };
}

const secretOf = (token: string) => token.split(".").at(-1)!;

describe("the console through a portal link", () => {
  let token: string;
  let t: Tab;

  beforeAll(async () => {
    token = (await world.stack.admin.createPortalLink({ sourceId: A, name: "A's team" })).token;
    t = await tab();
  });
  afterAll(async () => {
    await t?.context.close();
  });

  const nav = (name: string) =>
    t.page.getByRole("navigation").getByRole("link", { name, exact: true }).click();
  /** Nothing of source B on the page: its id, name, or destination. */
  async function expectNothingOfB(): Promise<void> {
    const text = await t.page.locator("body").innerText();
    for (const word of [B, "Tenant B", B_HOOK]) expect(text, `"${word}" on the page`).not.toContain(word);
  }

  it("opens on the source's overview; the token leaves the address bar and is sent nowhere but in the API's header", async () => {
    await t.page.goto(`${base}#portal=${token}`);
    await t.page.getByRole("heading", { name: "Overview" }).waitFor();
    await t.page.locator(`tr[data-destination="${A_HOOK}"]`).waitFor();
    expect(t.page.url()).toBe(base);
    expect(await t.page.evaluate("sessionStorage.getItem('hookpost.adminToken')")).toBe(token);
    expect(await t.page.locator("[data-testid=portal-banner]").innerText()).toContain("Tenant A");
    // Its destinations (the shared one too), none of B's.
    expect(await t.page.locator(`tr[data-destination="${SHARED}"]`).count()).toBe(1);
    expect(await t.page.locator(`tr[data-destination="${B_HOOK}"]`).count()).toBe(0);
    // The operator's pages are not offered.
    const links = await t.page.getByRole("navigation").getByRole("link").allInnerTexts();
    expect(links.map((l) => l.trim())).toEqual([
      "Hookpost",
      "Overview",
      "Dead letters",
      "Messages",
      "Search",
    ]);
    await expectNothingOfB();
    for (const s of t.sent) expect(s).not.toContain(secretOf(token));
    expect(await screenshots(t.page, "portal-overview")).toBeLessThanOrEqual(1);
  });

  it("searches the attempt log of its source only, without the whole log's retention", async () => {
    await nav("Search");
    const entries = t.page.locator("[data-testid=search-results] details.search-entry");
    await entries.first().waitFor();
    const messages = await entries.evaluateAll((els) => els.map((e) => e.getAttribute("data-message")));
    expect(messages).toContain(world.messages.a);
    expect(messages).not.toContain(world.messages.b);
    expect(await t.page.locator("[data-testid=retention]").count()).toBe(0);
    // Another source's destination is refused by the server, whatever the console sends.
    await t.page.goto(new URL(`search?destination=${B_HOOK}`, base).toString());
    expect(await t.page.locator("[role=alert]").first().getAttribute("data-code")).toBe("PermissionDenied");
    expect(t.errors).toEqual([]);
    // Back where the next test starts.
    await nav("Overview");
    await t.page.locator(`tr[data-destination="${A_HOOK}"]`).waitFor();
  });

  it("pauses and resumes a destination, rotates its secret, sends a test call", async () => {
    await t.page.locator(`tr[data-destination="${A_HOOK}"] a`).first().click();
    await t.page.getByRole("heading", { name: /A's hook/ }).waitFor();
    const state = t.page.locator("[data-testid=delivery-state]");
    await t.page.getByRole("button", { name: "Pause delivery" }).click();
    await expect.poll(() => state.getAttribute("data-status")).toBe("paused");
    expect((await world.stack.admin.getDestination({ id: A_HOOK })).destination?.enabled).toBe(false);
    await t.page.getByRole("button", { name: "Resume delivery" }).click();
    await expect.poll(() => state.getAttribute("data-status")).not.toBe("paused");
    expect((await world.stack.admin.getDestination({ id: A_HOOK })).destination?.enabled).toBe(true);

    await t.page.getByRole("button", { name: "Rotate secret" }).click();
    const secret = await t.page.locator("[data-testid=shown-once]").textContent();
    expect(secret?.length).toBeGreaterThan(20);

    await t.page.getByRole("button", { name: "Send test call" }).click();
    await expect
      .poll(() => t.page.locator("[data-testid=test-call] p").first().textContent(), { timeout: 30_000 })
      .toMatch(/: delivered/);
    // The form offers A as the only source.
    expect(await t.page.locator("input[name=source]").count()).toBe(1);
    await expectNothingOfB();
    expect(await screenshots(t.page, "portal-destination")).toBeLessThanOrEqual(1);
  });

  it("lists the source's dead letters only, and replays its own", async () => {
    const before = world.stack.receiver.requests.length;
    await nav("Dead letters");
    const rows = t.page.locator("[data-testid=dead-letters] tbody tr");
    await t.page.locator(`tr[data-message="${world.messages.a}"]`).first().waitFor();
    // A's call on its own hook and on the shared one; B's call on neither.
    expect(await rows.count()).toBe(2);
    expect(await t.page.locator(`tr[data-message="${world.messages.b}"]`).count()).toBe(0);
    const own = t.page.locator(`tr[data-message="${world.messages.a}"]`, { hasText: A_HOOK });
    await own.locator("input[type=checkbox]").check();
    await t.page.getByRole("button", { name: "Replay selected (1)" }).click();
    expect(await t.page.locator("[data-testid=replay-result]").textContent()).toBe("Replayed 1 dead letter.");
    await world.stack.receiver.waitFor(before + 1, 30_000);
    expect(world.stack.receiver.requests.at(-1)?.headers["idempotency-key"]).toBe(world.messages.a);
    await expectNothingOfB();
  });

  it("shows the message of its source, and refuses B's destination and the operator's pages", async () => {
    await t.page.goto(`${base}messages/${encodeURIComponent(world.messages.a)}`);
    await t.page.locator("[data-testid=message-timeline]").waitFor();
    await t.page.goto(`${base}destinations/${B_HOOK}`);
    await t.page.locator("[data-code=PermissionDenied]").waitFor();
    // The refusal says what happened and what to do, in the page's error state.
    const denied = t.page.locator("[data-testid=permission-denied]");
    expect(await denied.textContent()).toContain("may not see or change this");
    for (const path of ["sources", "audit", "deletions/del_x"]) {
      await t.page.goto(`${base}${path}`);
      await t.page.getByText("This page is not part of this portal.").waitFor();
    }
    await expectNothingOfB();
  });

  it("creates a destination for its source", async () => {
    await t.page.goto(base);
    await t.page.getByRole("link", { name: "New destination" }).click();
    await t.page.locator("input[name=id]").fill("a-new");
    await t.page.locator("input[name=name]").fill("A's new hook");
    await t.page.locator("textarea[name=urls]").fill(world.stack.receiver.url("/a-new"));
    await t.page.getByRole("button", { name: "Create destination" }).click();
    await t.page.waitForURL(/\/console\/destinations\/a-new$/);
    expect((await world.stack.admin.getDestination({ id: "a-new" })).destination?.sourceIds).toEqual([A]);
  });

  it("says clearly that the link no longer works once revoked", async () => {
    const linkId = (await world.stack.admin.listPortalLinks({ sourceId: A })).portalLinks[0]!.id;
    await world.stack.admin.revokePortalLink({ id: linkId });
    // The page's next refresh (every 5 s) is refused: it says so, without a reload…
    const ended = t.page.locator("[data-testid=portal-ended]");
    await ended.waitFor();
    expect(await ended.innerText()).toMatch(/This link no longer works[\s\S]*revoked/);
    // …and again after one, rather than offer the operator's sign-in.
    await t.page.reload();
    await ended.waitFor();
    expect(await ended.innerText()).toMatch(/This link no longer works[\s\S]*revoked/);
    expect(await t.page.locator("input[name=token]").count()).toBe(0);
    // The refused token is forgotten.
    expect(await t.page.evaluate("sessionStorage.getItem('hookpost.adminToken')")).toBeNull();
    expect(t.errors).toEqual([]);
  });
});

describe("portal links that cannot change anything, or no longer work", () => {
  it("a read-only link shows the source's world without a button that changes it", async () => {
    const { token } = await world.stack.admin.createPortalLink({ sourceId: A, readOnly: true });
    const t = await tab();
    await t.page.goto(`${base}#portal=${token}`);
    await t.page.locator(`tr[data-destination="${A_HOOK}"]`).waitFor();
    expect(await t.page.locator("[data-testid=portal-banner]").innerText()).toContain("read-only");
    expect(await t.page.getByRole("link", { name: "New destination" }).count()).toBe(0);
    await t.page.locator(`tr[data-destination="${A_HOOK}"] a`).first().click();
    await t.page.getByRole("heading", { name: /A's hook/ }).waitFor();
    for (const name of ["Pause delivery", "Rotate secret", "Send test call", "Delete"]) {
      expect(await t.page.getByRole("button", { name, exact: true }).isVisible(), name).toBe(false);
    }
    expect(await t.page.getByRole("button", { name: "Save settings" }).isDisabled()).toBe(true);
    await t.page.getByRole("navigation").getByRole("link", { name: "Dead letters" }).click();
    await t.page.locator(`tr[data-message="${world.messages.a}"]`).first().waitFor();
    expect(await t.page.getByRole("button", { name: /Replay/ }).count()).toBe(0);
    // Closing forgets the token.
    await t.page.getByRole("button", { name: "Close" }).click();
    await t.page.getByRole("heading", { name: "Portal closed" }).waitFor();
    expect(await t.page.evaluate("sessionStorage.getItem('hookpost.adminToken')")).toBeNull();
    expect(t.errors).toEqual([]);
    await t.context.close();
  });

  it("an expired link, and an unknown one, say so instead of a sign-in form", async () => {
    const expired = await storeExpiredLink(world.stack.nc, world.stack.admin, A);
    const t = await tab();
    await t.page.goto(`${base}#portal=${expired}`);
    const ended = t.page.locator("[data-testid=portal-ended]");
    await ended.waitFor();
    expect(await ended.innerText()).toMatch(/This link no longer works[\s\S]*expired/);
    expect(await t.page.locator("input[name=token]").count()).toBe(0);
    expect(await screenshots(t.page, "portal-expired")).toBeLessThanOrEqual(1);

    await t.page.goto(`${base}#portal=hpl.${A}.pl_AAAAAAAAAAAAAAAA.nope`);
    await t.page.reload();
    await ended.waitFor();
    expect(await ended.innerText()).toContain("unknown portal link");
    await t.context.close();
  });
});

describe("framing (CONSOLE_FRAME_ANCESTORS)", () => {
  it("the console opens in an iframe on a listed site, and is refused on any other", async () => {
    const { token } = await world.stack.admin.createPortalLink({ sourceId: A });
    const src = encodeURIComponent(`${base}#portal=${token}`);
    const t = await tab();
    await t.page.goto(`${listedOrigin}/?src=${src}`);
    const framed = t.page.frameLocator("#portal");
    await framed.getByRole("heading", { name: "Overview" }).waitFor();
    await framed.locator(`tr[data-destination="${A_HOOK}"]`).waitFor();

    const other = await t.context.newPage();
    const blocked: string[] = [];
    other.on("console", (m) => blocked.push(m.text()));
    const consoleAnswered = other.waitForResponse((r) => r.url().startsWith(base));
    await other.goto(`${otherOrigin}/?src=${src}`);
    const response = await consoleAnswered;
    expect(response.headers()["content-security-policy"]).toContain(`frame-ancestors ${listedOrigin}`);
    // Chromium says why it refused, and shows nothing of the console in the frame.
    await expect.poll(() => blocked.some((m) => /frame-ancestors/.test(m)), { timeout: 10_000 }).toBe(true);
    const frame = other.frames().find((f) => f !== other.mainFrame());
    expect(await frame?.locator("h2").count()).toBe(0);
    await t.context.close();
  });
});
