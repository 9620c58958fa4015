import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, originAllowed } from "@hookpost/contract";
import type { SourceRecord } from "@hookpost/core";
import { HttpStatusError } from "./http-error.js";

/**
 * CORS of the collection paths (`/v1/{track,…,batch,t,i,p,s,g,a,b}` and the settings path), and of
 * nothing else: the admin API (Connect) and the console never send a CORS header, so no other web
 * page can read them (docs/security.md "Browsers").
 *
 * A preflight carries neither the write key nor a body, so it cannot know the source: it is
 * answered for any origin, and the source's `allowed_origins` is applied to the request itself.
 * A request whose `Origin` the source does not allow is refused with 403 before anything is read
 * or stored, and its answer has no `Access-Control-Allow-Origin`, so the page cannot read it.
 * Answers that name no source (an unknown key, a body that is not JSON) carry the origin: they say
 * nothing but what was wrong with the request. Requests without `Origin` (servers, apps, curl) are
 * not browsers and are not affected.
 */

/**
 * What analytics-next sends (Content-Type: text/plain, Authorization: Basic from 1.84, and
 * X-Retry-Count on retries), gzip bodies, and the W3C trace context that ingest carries on.
 */
export const CORS_ALLOW_HEADERS = [
  "Authorization",
  "Content-Type",
  "Content-Encoding",
  "X-Retry-Count",
  "traceparent",
  "tracestate",
].join(", ");
/** A page may read these on an answer (the SDKs wait that long after a 429). */
export const CORS_EXPOSE_HEADERS = "Retry-After, X-RateLimit-Reset";
/**
 * How long a browser keeps a preflight's answer (Chromium's maximum): the answer depends on
 * nothing configurable, so it never goes stale.
 */
export const CORS_MAX_AGE_S = 7200;

/** The request's `Origin`, when it is a cross-origin browser request (a string header). */
export function requestOrigin(req: IncomingMessage): string | undefined {
  const origin = req.headers.origin;
  return typeof origin === "string" && origin !== "" ? origin : undefined;
}

/** Answers a preflight (OPTIONS) of a collection path: any origin may ask, `methods` only. */
export function answerPreflight(req: IncomingMessage, res: ServerResponse, methods: string): void {
  const origin = requestOrigin(req);
  const headers: Record<string, string | number> = {
    Allow: `${methods}, OPTIONS`,
    Vary: "Origin",
    "Content-Length": 0,
  };
  if (origin !== undefined) {
    headers["Access-Control-Allow-Origin"] = origin;
    headers["Access-Control-Allow-Methods"] = methods;
    headers["Access-Control-Allow-Headers"] = CORS_ALLOW_HEADERS;
    headers["Access-Control-Max-Age"] = CORS_MAX_AGE_S;
  }
  res.writeHead(204, headers);
  res.end();
}

/**
 * The CORS headers of an answer: the origin is echoed (never `*`, so that one answer never serves
 * another origin from a cache) unless the source, when known, does not allow it. Credentials
 * (cookies) are never allowed: the write key is the only credential.
 */
export function corsHeaders(
  req: IncomingMessage,
  source: Pick<SourceRecord, "allowedOrigins"> | undefined,
): Record<string, string> {
  const origin = requestOrigin(req);
  if (origin === undefined) return {};
  if (source !== undefined && !originAllowed(origin, source.allowedOrigins)) return { Vary: "Origin" };
  return {
    "Access-Control-Allow-Origin": origin,
    "Access-Control-Expose-Headers": CORS_EXPOSE_HEADERS,
    Vary: "Origin",
  };
}

/** Refuses (403, nothing stored) a browser request from an origin the source does not allow. */
export function checkOrigin(req: IncomingMessage, source: SourceRecord): void {
  const origin = requestOrigin(req);
  if (origin === undefined || originAllowed(origin, source.allowedOrigins)) return;
  throw new HttpStatusError(
    403,
    Code.PERMISSION_DENIED,
    "this source does not accept calls from this web page's origin (its allowed_origins); nothing was stored",
    "Origin",
  );
}
