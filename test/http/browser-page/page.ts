/**
 * A web page as a customer writes it: analytics-next from npm, pointed at Hookpost with
 * `cdnURL` (the settings path tells it where to send) and, when given, `apiHost`. The test drives
 * it through `window.hookpostTest` (browser-sdk.test.ts).
 */
import { AnalyticsBrowser } from "@segment/analytics-next";
import type { StartOptions } from "./start-options.js";

/** What the page saw: each call as it left the SDK's pipeline, and errors. */
const seen: { sent: Array<{ type: string; messageId: string }>; errors: string[] } = { sent: [], errors: [] };
let analytics: AnalyticsBrowser | undefined;

async function start(o: StartOptions): Promise<void> {
  const segment: Record<string, unknown> = {};
  if (o.apiHost) Object.assign(segment, { apiHost: o.apiHost, protocol: "http" });
  if (o.batching)
    segment.deliveryStrategy = { strategy: "batching", config: { ...o.batching, keepalive: o.keepalive } };
  else if (o.keepalive) segment.deliveryStrategy = { strategy: "standard", config: { keepalive: true } };
  analytics = AnalyticsBrowser.load(
    { writeKey: o.writeKey, cdnURL: o.cdnURL },
    Object.keys(segment).length > 0 ? { integrations: { "Segment.io": segment } } : {},
  );
  analytics.on("error", (e) => seen.errors.push(String((e as { reason?: unknown }).reason ?? e)));
  await analytics.addSourceMiddleware(({ payload, next }) => {
    seen.sent.push({ type: payload.obj.type as string, messageId: payload.obj.messageId as string });
    next(payload);
  });
  await analytics;
}

/** One call of each type, not awaited (as pages do); ids and order in `seen.sent`. */
function sendEveryType(tag: string): void {
  const a = analytics!;
  void a.identify(`user-${tag}`, { plan: "pro" });
  void a.track("Order Completed", { total: 12.5, tag });
  void a.page("Docs", "Home", { tag });
  void a.screen("Main", { tag });
  void a.group(`group-${tag}`, { size: 3 });
  void a.alias(`user2-${tag}`, `user-${tag}`);
}

/** A cross-origin request of the page's own, and what the page can read of its answer. */
async function read(
  url: string,
  init: RequestInit,
): Promise<{ status: number; text: string } | { error: string }> {
  try {
    const r = await fetch(url, init);
    return { status: r.status, text: await r.text() };
  } catch (err) {
    return { error: String(err) };
  }
}

/** Reads an answer's status and headers the way an SDK does (`null` when CORS hides a header). */
async function readHeaders(
  url: string,
  init: RequestInit,
  names: string[],
): Promise<{ status: number; headers: Record<string, string | null> }> {
  const r = await fetch(url, init);
  return { status: r.status, headers: Object.fromEntries(names.map((n) => [n, r.headers.get(n)])) };
}

Object.assign(window, { hookpostTest: { start, sendEveryType, seen, read, readHeaders } });
