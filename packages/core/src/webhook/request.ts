import { createHash } from "node:crypto";
import { hasLoneSurrogate, type Method } from "@hookpost/contract";
import type { DestinationRecord } from "../model/destination.js";
import { ExpressionError, evaluateExpression } from "./expression.js";
import { type CompiledTemplate, filterListsOf, shapingOf, truthy } from "./shaping.js";
import { signatureHeaders } from "./signing.js";

export const USER_AGENT = "Hookpost/1.0";
/** A mapping's body is at most this many bytes serialized. */
export const MAX_MAPPED_BODY_BYTES = 256 * 1024;
const MAX_RENDERED_HEADER_CHARS = 4096;
/** Names a static header may not take (the admin API refuses them too; this is the backstop). */
const RESERVED =
  /^(content-type|content-length|host|user-agent|x-signature|x-signature-next|idempotency-key|transfer-encoding|connection|webhook-.*)$/i;

/** What a request's expressions may read beside the body: `$messageId`, `$sourceId`, `$destinationId`. */
export interface WebhookIds {
  messageId: string;
  sourceId: string;
  destinationId: string;
}

/** One request as the receiver gets it (traceparent aside, which tracing adds when on). */
export interface WebhookRequest {
  method: Method;
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** One request per URL in the order tried, or why the destination does not get the call. */
export type Prepared = { filtered: string } | { requests: WebhookRequest[] };

/**
 * Why a request could not be rendered (a mapping or placeholder failed, a signing secret is
 * unusable): an attempt that sent nothing, retried, dead-lettered at the window. The message
 * names the field and never carries the call's content or a secret.
 */
export class RenderError extends Error {
  override readonly name = "RenderError";
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The requests a destination sends for one call whose default body is `body` (docs/design/
 * shaping.md section 4): the one rendering path of delivery and of the dry run. A destination
 * without filter, mapping or templates takes the stored bytes as they are (no JSON parsed).
 */
export async function prepareRequests(
  dest: DestinationRecord,
  body: Uint8Array,
  ids: WebhookIds,
  now: Date = new Date(),
): Promise<Prepared> {
  const rendered = await renderCall(dest, body, ids);
  if ("filtered" in rendered) return rendered;
  const { shaping, out, input, bindings } = rendered;
  // A batching destination's receiver reads arrays: a call sent alone (a test call, the dry run)
  // is a batch of one, as it would be if no other call came within max_wait.
  if (dest.batching) return { requests: prepareBatchRequests(dest, [out], batchKey([ids.messageId]), now) };
  const base = baseHeaders(dest, ids.messageId);
  for (const [name, template] of shaping.headers) {
    if (name in base) base[name] = await renderHeader(name, template, input, bindings);
  }
  sign(base, dest, out, ids.messageId, now);
  const requests: WebhookRequest[] = [];
  for (const [i, url] of (dest.urls ?? []).entries()) {
    const template = shaping.urls[i];
    const rendered = template ? await renderUrl(`urls[${i}]`, template, input, bindings) : url;
    requests.push({
      method: dest.method ?? "POST",
      url: rendered,
      headers: withUrlCredentials(base, rendered),
      body: out,
    });
  }
  return { requests };
}

/**
 * One call's element of a batch (docs/design/shaping.md section 7.1): its body as the destination
 * renders it (filter, mapping), or why the filter refuses it. RenderError as prepareRequests.
 */
export async function renderElement(
  dest: DestinationRecord,
  body: Uint8Array,
  ids: WebhookIds,
): Promise<{ filtered: string } | { body: Uint8Array }> {
  const rendered = await renderCall(dest, body, ids);
  return "filtered" in rendered ? rendered : { body: rendered.out };
}

/**
 * The requests of one batch: its elements as one JSON array, signed once, `batchId` as its
 * Idempotency-Key and webhook-id. Templates render one call, so a destination with one cannot
 * batch (the admin API refuses the combination; this is the backstop).
 */
export function prepareBatchRequests(
  dest: DestinationRecord,
  elements: readonly Uint8Array[],
  batchId: string,
  now: Date = new Date(),
): WebhookRequest[] {
  const shaping = shapingOrRenderError(dest);
  if (shaping.headers.size > 0 || shaping.urls.some((t) => t !== undefined)) {
    throw new RenderError("a URL or header placeholder renders one call: it cannot render a batch");
  }
  const body = jsonArray(elements);
  const headers = baseHeaders(dest, batchId);
  sign(headers, dest, body, batchId, now);
  return (dest.urls ?? []).map((url) => ({
    method: dest.method ?? "POST",
    url,
    headers: withUrlCredentials(headers, url),
    body,
  }));
}

/**
 * A batch's Idempotency-Key and webhook-id: `batch_` + 32 hex digits of SHA-256 over its members'
 * message ids in order, so the same members (a retried batch) give the same key.
 */
export function batchKey(messageIds: readonly string[]): string {
  const h = createHash("sha256");
  for (const id of messageIds) h.update(id).update("\n");
  return `batch_${h.digest("hex").slice(0, 32)}`;
}

/** `[e1,e2,…]` from elements that are each JSON text already. */
export function jsonArray(elements: readonly Uint8Array[]): Uint8Array {
  let size = 2 + Math.max(0, elements.length - 1);
  for (const e of elements) size += e.length;
  const out = new Uint8Array(size);
  out[0] = 0x5b; // [
  let at = 1;
  elements.forEach((e, i) => {
    if (i > 0) out[at++] = 0x2c; // ,
    out.set(e, at);
    at += e.length;
  });
  out[at] = 0x5d; // ]
  return out;
}

/** The byte length an element adds to a batch's array (its comma included). */
export const elementBytes = (element: Uint8Array, first: boolean) => element.length + (first ? 2 : 1);

function shapingOrRenderError(dest: DestinationRecord): ReturnType<typeof shapingOf> {
  try {
    return shapingOf(dest);
  } catch (err) {
    throw new RenderError((err as Error).message);
  }
}

/** The filter and the mapping of one call: its request body, or why it is filtered. */
async function renderCall(
  dest: DestinationRecord,
  body: Uint8Array,
  ids: WebhookIds,
): Promise<
  | { filtered: string }
  | {
      shaping: ReturnType<typeof shapingOf>;
      out: Uint8Array;
      input: unknown;
      bindings: Record<string, unknown>;
    }
> {
  const shaping = shapingOrRenderError(dest);
  let out = body;
  let input: unknown;
  let bindings: Record<string, unknown> = {};
  if (!shaping.plain) {
    try {
      input = JSON.parse(decoder.decode(body));
    } catch {
      throw new RenderError("the stored body is not JSON");
    }
    bindings = { messageId: ids.messageId, sourceId: ids.sourceId, destinationId: ids.destinationId };
    const call = input as { type?: unknown; event?: unknown };
    const listed = filterListsOf(dest, { type: String(call.type), event: call.event });
    if (listed !== undefined) return { filtered: listed };
    if (shaping.filterExpression) {
      const pass = await evaluate("filter.expression", shaping.filterExpression, input, bindings);
      if (!truthy(pass)) return { filtered: "filter: expression" };
    }
    if (shaping.mapping) out = mappedBody(await evaluate("mapping", shaping.mapping, input, bindings));
  }
  return { shaping, out, input, bindings };
}

function sign(
  headers: Record<string, string>,
  dest: DestinationRecord,
  body: Uint8Array,
  id: string,
  now: Date,
): void {
  try {
    Object.assign(headers, signatureHeaders(dest, body, id, now));
  } catch (err) {
    throw new RenderError(`signing failed: ${(err as Error).message}`);
  }
}

/** Static headers (values with placeholders rendered later), then the ones Hookpost sets. */
function baseHeaders(dest: DestinationRecord, messageId: string): Record<string, string> {
  const h: Record<string, string> = {};
  for (const [name, value] of Object.entries(dest.headers ?? {})) if (!RESERVED.test(name)) h[name] = value;
  h["Content-Type"] = "application/json";
  h["User-Agent"] = USER_AGENT;
  h["Idempotency-Key"] = messageId;
  return h;
}

/** Credentials in the URL become Basic auth, as curl does (the request line never carries them). */
function withUrlCredentials(headers: Record<string, string>, url: string): Record<string, string> {
  const at = url.indexOf("@");
  if (at < 0) return headers;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return headers;
  }
  if (!u.username || Object.keys(headers).some((k) => k.toLowerCase() === "authorization")) return headers;
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  return { ...headers, Authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}` };
}

async function evaluate(
  field: string,
  e: Parameters<typeof evaluateExpression>[0],
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<unknown> {
  try {
    return await evaluateExpression(e, input, bindings);
  } catch (err) {
    const why = err instanceof ExpressionError ? err.message : String(err);
    throw new RenderError(`${field} failed: ${why}`);
  }
}

function mappedBody(value: unknown): Uint8Array {
  if (value === undefined) throw new RenderError("mapping failed: it returned nothing for this call");
  if (typeof value === "function") throw new RenderError("mapping failed: it returned a function, not JSON");
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new RenderError(`mapping failed: its result is not JSON (${(err as Error).message})`);
  }
  if (text === undefined) throw new RenderError("mapping failed: its result is not JSON");
  const bytes = encoder.encode(text);
  if (bytes.length > MAX_MAPPED_BODY_BYTES) {
    throw new RenderError(
      `mapping failed: the body is ${bytes.length} bytes, at most ${MAX_MAPPED_BODY_BYTES}`,
    );
  }
  return bytes;
}

/** A placeholder's value as text: strings, numbers and booleans; anything else fails the attempt. */
async function placeholderText(
  field: string,
  part: { expression: Parameters<typeof evaluateExpression>[0]; at: number },
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<string> {
  const where = `${field} at position ${part.at}`;
  const v = await evaluate(where, part.expression, input, bindings);
  if (typeof v === "string") return v;
  if ((typeof v === "number" && Number.isFinite(v)) || typeof v === "boolean") return String(v);
  const what =
    v === undefined
      ? "nothing"
      : Array.isArray(v)
        ? "an array"
        : typeof v === "object"
          ? "an object"
          : typeof v;
  throw new RenderError(`${where} failed: the placeholder gave ${what}, not text`);
}

/**
 * Each value URL-encoded: a user id cannot add path segments or query parameters. Nor remove
 * one: in the path, a value that is a whole dot segment ("." or "..", which URL parsing resolves
 * whether encoded or not) is refused, as is half a surrogate pair (no UTF-8 to encode).
 */
async function renderUrl(
  field: string,
  template: CompiledTemplate,
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<string> {
  let out = "";
  for (const p of template) {
    if ("text" in p) {
      out += p.text;
      continue;
    }
    const value = await placeholderText(field, p, input, bindings);
    if (hasLoneSurrogate(value)) {
      throw new RenderError(`${field} failed: the placeholder gave text with half a UTF-16 surrogate pair`);
    }
    if ((value === "." || value === "..") && !/[?#]/.test(out)) {
      throw new RenderError(
        `${field} failed: the placeholder gave "${value}", which would change the URL's path`,
      );
    }
    out += encodeURIComponent(value);
  }
  return out;
}

async function renderHeader(
  name: string,
  template: CompiledTemplate,
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<string> {
  const field = `headers[${JSON.stringify(name)}]`;
  let out = "";
  for (const p of template) out += "text" in p ? p.text : await placeholderText(field, p, input, bindings);
  // What undici would refuse, or what could smuggle a header: checked here, with the reason.
  if (/[\r\n\0]/.test(out)) throw new RenderError(`${field} failed: the rendered value holds CR, LF or NUL`);
  if (out.length > MAX_RENDERED_HEADER_CHARS) {
    throw new RenderError(
      `${field} failed: the rendered value is longer than ${MAX_RENDERED_HEADER_CHARS} characters`,
    );
  }
  if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(out)) {
    throw new RenderError(`${field} failed: the rendered value holds characters a header cannot carry`);
  }
  return out;
}
