import type { DestinationRecord, Logger, UrlOutcomeRecord } from "@hookpost/core";
import { endRequestSpan, RESPONSE_EXCERPT_BYTES, startRequestSpan, type TraceContext } from "@hookpost/core";
import type { Dispatcher } from "undici";
import { logUrl, maskUrl } from "./redact-url.js";
import { parseRetryAfter } from "./retry.js";
import { signatureHeaders } from "./signing.js";
import { SsrfRefusedError } from "./ssrf.js";

export const USER_AGENT = "Hookpost/1.0";
/** The whole exchange is aborted this long after WEBHOOK_TIMEOUT: undici times out at 0.5 s steps above 1 s and must go first. */
const ABORT_AFTER_TIMEOUT_MS = 1000;
/** Response bodies are read up to this much, then dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** Names a static header may not take (the admin API refuses them too; this is the backstop). */
const RESERVED =
  /^(content-type|content-length|host|user-agent|x-signature|x-signature-next|idempotency-key|transfer-encoding|connection|webhook-.*)$/i;

export interface AttemptOutcome extends UrlOutcomeRecord {
  ok: boolean;
  retryable: boolean;
  retryAfterMs?: number;
  durationMs: number;
  /** Date.now() when the attempt started (for the attempt log). */
  startedAt: number;
  /** The first RESPONSE_EXCERPT_BYTES of the response body, as text ("" without a response). */
  responseExcerpt: string;
  /** Cut short by shutdown: says nothing about the endpoint. */
  aborted: boolean;
}

export interface DeliveryResult {
  delivered: boolean;
  /** Outcomes of the URLs tried, in order; the last one is the success when delivered. */
  outcomes: AttemptOutcome[];
}

export interface SenderOptions {
  agent: Dispatcher;
  timeoutMs: number;
  logger: Logger;
  onAttempt?: (o: AttemptOutcome) => void;
}

/** POSTs one body to a destination's URLs in order until one answers 2xx. */
export class WebhookSender {
  readonly #o: SenderOptions;

  constructor(o: SenderOptions) {
    this.#o = o;
  }

  async deliver(
    dest: DestinationRecord,
    body: Uint8Array,
    messageId: string,
    signal: AbortSignal,
    trace?: TraceContext,
  ): Promise<DeliveryResult> {
    const outcomes: AttemptOutcome[] = [];
    if (!Array.isArray(dest.urls) || dest.urls.length === 0) {
      return { delivered: false, outcomes: [notSentOutcome("", "the destination has no URLs")] };
    }
    for (const url of dest.urls) {
      // Tracing hook: a client span per request; the receiver gets its `traceparent`.
      let headers: Record<string, string>;
      try {
        headers = this.#headers(dest, body, messageId, url);
      } catch (err) {
        // The request could not be prepared (a secret this signing cannot use, say): no URL
        // would fare better.
        outcomes.push(notSentOutcome(url, (err as Error).message));
        break;
      }
      const span = startRequestSpan(trace, url, dest.id, messageId);
      span.inject(headers);
      const outcome = await this.attempt(url, headers, body, signal);
      endRequestSpan(span, outcome);
      outcomes.push(outcome);
      this.#o.onAttempt?.(outcome);
      this.#log(dest, messageId, outcome);
      if (outcome.ok) return { delivered: true, outcomes };
      if (outcome.aborted) break;
    }
    return { delivered: false, outcomes };
  }

  #headers(
    dest: DestinationRecord,
    body: Uint8Array,
    messageId: string,
    url: string,
  ): Record<string, string> {
    const h: Record<string, string> = {};
    for (const [name, value] of Object.entries(dest.headers ?? {})) if (!RESERVED.test(name)) h[name] = value;
    const u = safeParse(url);
    // Credentials in the URL become Basic auth, as curl does (the request line never carries them).
    if (u?.username && !Object.keys(h).some((k) => k.toLowerCase() === "authorization")) {
      const user = decodeURIComponent(u.username);
      const pass = decodeURIComponent(u.password);
      h.Authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`;
    }
    h["Content-Type"] = "application/json";
    h["User-Agent"] = USER_AGENT;
    h["Idempotency-Key"] = messageId;
    // Every secret that signs now: two during a rotation's overlap (signing.ts).
    try {
      Object.assign(h, signatureHeaders(dest, body, messageId));
    } catch (err) {
      throw new Error(`signing failed: ${(err as Error).message}`);
    }
    return h;
  }

  /** One request. Never throws: every failure becomes an outcome. */
  async attempt(
    url: string,
    headers: Record<string, string>,
    body: Uint8Array,
    signal: AbortSignal,
  ): Promise<AttemptOutcome> {
    const started = performance.now();
    const startedAt = Date.now();
    let excerpt = "";
    const done = (o: StatusOutcome): AttemptOutcome => ({
      url: maskUrl(url),
      durationMs: performance.now() - started,
      startedAt,
      responseExcerpt: excerpt,
      aborted: signal.aborted,
      ...o,
    });
    const u = safeParse(url);
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
      // A stored URL the admin API would refuse: the configuration may still be fixed.
      return done(notSent("not an http(s) URL"));
    }
    const timeoutMs = this.#o.timeoutMs;
    const ac = new AbortController();
    let timedOut = false;
    // undici's own headers and body timeouts fire first and close the socket; an abort of a
    // request already sent leaves its socket open (measured: 10 of 10 still open 1 s later),
    // which is how hung endpoints used to pile up thousands of sockets. The abort stays as the
    // deadline of the whole exchange.
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort(new Error("timeout"));
    }, timeoutMs + ABORT_AFTER_TIMEOUT_MS);
    const onShutdown = () => ac.abort(new Error("shutdown"));
    signal.addEventListener("abort", onShutdown, { once: true });
    try {
      const res = await this.#o.agent.request({
        origin: u.origin,
        path: `${u.pathname}${u.search}`,
        method: "POST",
        headers,
        body,
        signal: ac.signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      // The deadline covers the body too; then drop it (destroying a large one closes the socket).
      let read = 0;
      const head: Buffer[] = [];
      for await (const chunk of res.body) {
        // The attempt log keeps the first 4 KiB: what an endpoint says about its failure.
        if (read < RESPONSE_EXCERPT_BYTES) head.push(chunk as Buffer);
        read += (chunk as Buffer).length;
        if (read >= MAX_RESPONSE_BYTES) {
          res.body.destroy();
          break;
        }
      }
      excerpt = Buffer.concat(head).subarray(0, RESPONSE_EXCERPT_BYTES).toString("utf8");
      return done(statusOutcome(res.statusCode, res.headers["retry-after"]));
    } catch (err) {
      if (timedOut || isHeadersTimeout(err)) {
        return done({
          ok: false,
          retryable: true,
          status: 0,
          error: "timeout",
          detail: `timeout after ${timeoutMs} ms`,
        });
      }
      return done(errorOutcome(err, timeoutMs));
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onShutdown);
    }
  }

  #log(dest: DestinationRecord, messageId: string, o: AttemptOutcome): void {
    if (o.ok || o.aborted) return;
    const fields = {
      destinationId: dest.id,
      messageId,
      url: logUrl(o.url),
      status: o.status,
      error: o.error,
      detail: o.detail,
      retryable: o.retryable,
      ms: Math.round(o.durationMs),
    };
    if (o.error === "timeout") this.#o.logger.warn(fields, "webhook timed out");
    else this.#o.logger.info(fields, "webhook attempt failed");
  }
}

/**
 * No request was sent because it could not be prepared (signing, body, a configuration that
 * changed under it). Retryable: the configuration may be fixed within the retry window; after
 * it the delivery is a dead letter with this reason. The reason must not carry secrets.
 */
export function notSentOutcome(url: string, why: string): AttemptOutcome {
  return {
    url: url === "" ? "" : maskUrl(url),
    ...notSent(why),
    durationMs: 0,
    startedAt: Date.now(),
    responseExcerpt: "",
    aborted: false,
  };
}

function notSent(why: string): StatusOutcome {
  return { ok: false, retryable: true, status: 0, error: "not_sent", detail: `not sent: ${why}` };
}

type StatusOutcome = Omit<AttemptOutcome, "url" | "durationMs" | "aborted" | "startedAt" | "responseExcerpt">;

function statusOutcome(status: number, retryAfter: string | string[] | undefined): StatusOutcome {
  if (status < 100 || status > 599) {
    // Not HTTP as we know it (a broken proxy, a bad server): the endpoint may recover like a 5xx.
    const detail = `status ${status} is not a valid HTTP status (100-599): retried`;
    return { ok: false, retryable: true, status, error: "invalid_response", detail };
  }
  if (status >= 200 && status < 300) return { ok: true, retryable: false, status, error: "http", detail: "" };
  if (status >= 300 && status < 400) {
    return {
      ok: false,
      retryable: false,
      status,
      error: "redirect",
      detail: `${status} is not retried: redirects are not followed`,
    };
  }
  const retryable = status === 408 || status === 429 || (status >= 500 && status < 600);
  // The rule, readable: "422 is not retried", "503 is retried".
  const detail = `${status} is ${retryable ? "" : "not "}retried`;
  const out: StatusOutcome = { ok: false, retryable, status, error: "http", detail };
  if (status === 429 || status === 503) {
    const ms = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
    if (ms !== undefined) out.retryAfterMs = ms;
  }
  return out;
}

const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"]);
const TLS_CODE = /CERT|SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|HOSTNAME_MISMATCH/;

/** undici gave up waiting for the response's headers (HEADERS_TIMEOUT): the endpoint hung. */
function isHeadersTimeout(err: unknown): boolean {
  return (err as { code?: string } | undefined)?.code === "UND_ERR_HEADERS_TIMEOUT";
}

function errorOutcome(err: unknown, timeoutMs: number): StatusOutcome {
  const chain: Array<{ code?: string; message?: string }> = [];
  for (let e = err as { cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) {
    chain.push(e as { code?: string; message?: string });
  }
  const first = chain[0] ?? {};
  const detail = (e: { code?: string; message?: string }) =>
    [e.code, e.message].filter(Boolean).join(": ").slice(0, 300);
  const ssrf = chain.find((e) => e instanceof SsrfRefusedError);
  if (ssrf)
    return { ok: false, retryable: false, status: 0, error: "ssrf", detail: ssrf.message ?? "refused" };
  const timeout = chain.find((e) => e.code !== undefined && TIMEOUT_CODES.has(e.code));
  if (timeout) {
    const d = `timeout after ${timeoutMs} ms (${detail(timeout)})`;
    return { ok: false, retryable: true, status: 0, error: "timeout", detail: d };
  }
  const tls = chain.find((e) => e.code !== undefined && TLS_CODE.test(e.code));
  if (tls) return { ok: false, retryable: false, status: 0, error: "tls", detail: detail(tls) };
  // undici refused to build the request (a header value it cannot send): nothing went out.
  if (first.code === "UND_ERR_INVALID_ARG") return notSent(`invalid request: ${first.message}`);
  return { ok: false, retryable: true, status: 0, error: "connection", detail: detail(first) || String(err) };
}

/** Parsed destination URLs: a handful of strings, each parsed twice per attempt before this. */
const parsedUrls = new Map<string, URL | undefined>();
const MAX_PARSED_URLS = 1024;

/** The URL, or undefined when it does not parse. The result is shared: callers must not change it. */
function safeParse(url: string): URL | undefined {
  if (parsedUrls.has(url)) return parsedUrls.get(url);
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    u = undefined;
  }
  if (parsedUrls.size >= MAX_PARSED_URLS) parsedUrls.clear();
  parsedUrls.set(url, u);
  return u;
}
