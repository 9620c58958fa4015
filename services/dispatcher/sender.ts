import { EventEmitter } from "node:events";
import type { Readable } from "node:stream";
import type { Method } from "@hookpost/contract";
import type {
  DestinationRecord,
  Logger,
  Prepared,
  UrlOutcomeRecord,
  WebhookIds,
  WebhookRequest,
} from "@hookpost/core";
import {
  endRequestSpan,
  getOrInsert,
  prepareRequests,
  RESPONSE_EXCERPT_BYTES,
  RenderError,
  startRequestSpan,
  type TraceContext,
} from "@hookpost/core";
import type { Dispatcher } from "undici";
import { logUrl, maskUrl } from "./redact-url.js";
import { parseRetryAfter } from "./retry.js";
import { SsrfRefusedError } from "./ssrf.js";

/** The whole exchange is aborted this long after WEBHOOK_TIMEOUT: undici times out at 0.5 s steps above 1 s and must go first. */
const ABORT_AFTER_TIMEOUT_MS = 1000;
/** Response bodies are read up to this much, then dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;

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
  /** The body sent when a mapping made it differ from the routed record's (attempt log). */
  requestBody?: string;
}

export interface DeliveryResult {
  /** Done with: a 2xx, or filtered (no request sent). */
  delivered: boolean;
  /** Set when the destination's filter refused the call at this attempt (the reason). */
  filtered?: string;
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
  /**
   * Attempts in flight per caller's signal (the replica's shutdown): one listener per signal
   * aborts them all. A listener per attempt cost a scan of every other one on each add.
   */
  readonly #inFlight = new WeakMap<AbortSignal, Set<RequestAbort>>();

  constructor(o: SenderOptions) {
    this.#o = o;
  }

  /**
   * One attempt: the requests prepared (core's prepareRequests: filter, mapping, templates,
   * signatures; the same path as the dry run), then each URL in order until one answers 2xx. A
   * call the destination's filter now refuses is `delivered` with one "filtered" outcome and no
   * request sent.
   */
  async deliver(
    dest: DestinationRecord,
    body: Uint8Array,
    ids: WebhookIds,
    signal: AbortSignal,
    trace?: TraceContext,
  ): Promise<DeliveryResult> {
    if (!Array.isArray(dest.urls) || dest.urls.length === 0) {
      // A FAN_OUT target whose URL was removed since: never dropped, dead-lettered at the window.
      const why = dest.target
        ? `URL ${dest.target.urlIndex} of the destination is no longer configured`
        : "the destination has no URLs";
      return { delivered: false, outcomes: [notSentOutcome("", why)] };
    }
    let prepared: Prepared;
    try {
      prepared = await prepareRequests(dest, body, ids);
    } catch (err) {
      // The request could not be prepared (a mapping that fails, a secret this signing cannot
      // use): no URL would fare better.
      const why =
        err instanceof RenderError ? err.message : `${(err as Error).name}: ${(err as Error).message}`;
      return { delivered: false, outcomes: [notSentOutcome(dest.urls[0]!, why)] };
    }
    if ("filtered" in prepared) {
      return { delivered: true, filtered: prepared.filtered, outcomes: [filteredOutcome(prepared.filtered)] };
    }
    // A mapped body is not the routed record's: the attempt record keeps what was sent.
    const mapped = prepared.requests[0]?.body !== body;
    return this.send(dest, prepared.requests, ids.messageId, signal, trace, mapped);
  }

  /**
   * Prepared requests (one per URL, in order) until one answers 2xx. `keepBody`: the attempt
   * records keep the body sent (a mapping made it differ from the routed record's).
   */
  async send(
    dest: DestinationRecord,
    requests: readonly WebhookRequest[],
    messageId: string,
    signal: AbortSignal,
    trace: TraceContext | undefined,
    keepBody = false,
  ): Promise<DeliveryResult> {
    const outcomes: AttemptOutcome[] = [];
    for (const request of requests) {
      // Tracing hook: a client span per request; the receiver gets its `traceparent`.
      const span = startRequestSpan(trace, request.url, dest.id, messageId);
      const headers = { ...request.headers };
      span.inject(headers);
      const outcome = await this.attempt(request.url, headers, request.body, signal, request.method);
      endRequestSpan(span, outcome);
      if (keepBody) outcome.requestBody = Buffer.from(request.body).toString("utf8");
      outcomes.push(outcome);
      this.#o.onAttempt?.(outcome);
      this.#log(dest, messageId, outcome);
      if (outcome.ok) return { delivered: true, outcomes };
      if (outcome.aborted) break;
    }
    return { delivered: false, outcomes };
  }

  /** One request. Never throws: every failure becomes an outcome. */
  async attempt(
    url: string,
    headers: Record<string, string>,
    body: Uint8Array,
    signal: AbortSignal,
    method: Method = "POST",
  ): Promise<AttemptOutcome> {
    const started = performance.now();
    const startedAt = Date.now();
    let excerpt = "";
    const parsed = safeParse(url);
    const done = (o: StatusOutcome): AttemptOutcome => ({
      url: parsed.masked,
      durationMs: performance.now() - started,
      startedAt,
      responseExcerpt: excerpt,
      aborted: signal.aborted,
      ...o,
    });
    const u = parsed.url;
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
      // A stored URL the admin API would refuse: the configuration may still be fixed.
      return done(notSent("not an http(s) URL"));
    }
    const timeoutMs = this.#o.timeoutMs;
    const ac = new RequestAbort();
    let timedOut = false;
    // undici's own headers and body timeouts fire first and close the socket; an abort of a
    // request already sent leaves its socket open (measured: 10 of 10 still open 1 s later),
    // which is how hung endpoints used to pile up thousands of sockets. The abort stays as the
    // deadline of the whole exchange.
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort(new Error("timeout"));
    }, timeoutMs + ABORT_AFTER_TIMEOUT_MS);
    const running = this.#running(signal);
    running.add(ac);
    try {
      const res = await this.#o.agent.request({
        origin: u.origin,
        path: `${u.pathname}${u.search}`,
        method,
        headers,
        body,
        signal: ac,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      // The deadline covers the body too.
      excerpt = await readExcerpt(res.body);
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
      running.delete(ac);
    }
  }

  #running(signal: AbortSignal): Set<RequestAbort> {
    return getOrInsert(this.#inFlight, signal, () => {
      const all = new Set<RequestAbort>();
      const abortAll = () => {
        for (const ac of all) ac.abort(new Error("shutdown"));
      };
      signal.addEventListener("abort", abortAll, { once: true });
      return all;
    });
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

/** No request: the destination's filter refuses the call now (docs/design/shaping.md section 3). */
export function filteredOutcome(reason: string): AttemptOutcome {
  return {
    url: "",
    ok: true,
    retryable: false,
    status: 0,
    error: "filtered",
    detail: reason,
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

/**
 * Reads a response body to its end and answers its first 4 KiB (what the attempt log keeps: what
 * an endpoint says about its failure); past MAX_RESPONSE_BYTES the body is dropped (destroying a
 * large one closes the socket). Events rather than `for await`, whose iterator and promise per
 * chunk showed in the profile of every delivery. Rejects as the iterator would: on an error or a
 * close before the end.
 */
function readExcerpt(body: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const head: Buffer[] = [];
    let read = 0;
    let settled = false;
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      if (err !== undefined) reject(err);
      else resolve(Buffer.concat(head).subarray(0, RESPONSE_EXCERPT_BYTES).toString("utf8"));
    };
    body.on("data", (chunk: Buffer) => {
      if (read < RESPONSE_EXCERPT_BYTES) head.push(chunk);
      read += chunk.length;
      if (read >= MAX_RESPONSE_BYTES) {
        settle();
        body.destroy();
      }
    });
    body.once("end", () => settle());
    body.once("error", settle);
    // Every body closes, most after their end: the error (and its stack) only when it is one.
    body.once("close", () => {
      if (settled) return;
      settle(
        Object.assign(new Error("response closed before its end"), { code: "ERR_STREAM_PREMATURE_CLOSE" }),
      );
    });
  });
}

/**
 * The abort of one request. undici takes an EventEmitter with `aborted` and `reason` as a signal
 * as it takes an AbortSignal; an AbortController and its EventTarget per attempt were about 3 % of
 * the dispatcher's CPU (createAbortSignal, addEventListener, removeEventListener in profiles).
 */
class RequestAbort extends EventEmitter {
  aborted = false;
  reason: unknown;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}

/** A destination URL as attempts use it: parsed (undefined when it does not parse) and masked. */
interface ParsedUrl {
  url: URL | undefined;
  masked: string;
}

/** Destination URLs parsed and masked: a handful of strings, each parsed and masked per attempt before this. */
const parsedUrls = new Map<string, ParsedUrl>();
const MAX_PARSED_URLS = 1024;

/** The URL parsed and masked. The result is shared: callers must not change it. */
function safeParse(url: string): ParsedUrl {
  let p = parsedUrls.get(url);
  if (p) return p;
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    u = undefined;
  }
  p = { url: u, masked: maskUrl(url) };
  if (parsedUrls.size >= MAX_PARSED_URLS) parsedUrls.clear();
  parsedUrls.set(url, p);
  return p;
}
