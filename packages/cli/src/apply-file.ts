import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import type { FieldViolation } from "@hookpost/contract";
// The server's own destination rules (pure functions), so a file that passes here is not
// refused half-way through an apply.
import {
  allowedOriginsViolations,
  batchingViolations,
  behindAfterViolations,
  consentCategoriesViolations,
  eventTypesViolations,
  expressionViolations,
  failingBelowViolations,
  filterViolations,
  formatDuration,
  headersViolations,
  normalizeOrigins,
  operatorSecretViolations,
  operatorUrlViolations,
  parseDuration,
  sharedSecretViolations,
  urlsViolations,
  userVariables,
} from "@hookpost/contract";
import { LineCounter, type Node, parseDocument } from "yaml";
import { InputError, type InputProblem } from "./errors.js";
import {
  type BatchingView,
  CONSENT_MISSING,
  DELIVERY_MODE,
  type DestinationView,
  type FilterView,
  METHOD_NAMES,
  ORDERING,
  type RetryView,
  SIGNING,
} from "./views.js";

/**
 * The declarative file of `hookpost apply -f`: the sources and destinations that should exist.
 *
 *   sources:
 *     - { id: web, name: Web app, allowedOrigins: [https://shop.example.com] }   # omit: any origin
 *   destinations:
 *     - id: crm
 *       name: CRM
 *       sources: [web]
 *       urls: [https://crm.example.com/hooks]
 *       headers: { X-Team: growth }
 *       secretEnv: CRM_SECRET        # or secret: …
 *       signing: segment             # or standard-webhooks, standard-webhooks-ed25519
 *       ordering: unordered          # or per-user
 *       consentCategories: [Analytics]   # calls must grant these; omit for none
 *       consentMissing: deliver      # or filter: calls without a consent object
 *       filter: { types: [track], events: [Signed Up], expression: 'properties.plan = "pro"' }
 *       mapping: '{"id": userId, "event": event}'   # JSONata; omit for the default body
 *       method: PUT                  # POST (default), PUT or PATCH
 *       retry: { window: 2h, delays: [10s, 1m, 5m] }   # the last delay repeats; omit for the server's
 *       batching: { maxCalls: 100, maxBytes: 524288, maxWait: 1s }   # JSON arrays; omit for one call per request
 *       deliveryMode: failover       # or fan-out: every URL gets every call
 *       enabled: true
 *   operatorWebhooks:
 *     - id: pager
 *       name: Pager
 *       url: https://pager.example.com/hookpost
 *       secretEnv: PAGER_SECRET         # or secret: whsec_…; omitted: generated (printed once)
 *       events: [destination.failing, destination.recovered]   # omitted: every type
 *       failingBelow: 0.5                # omitted: 0.5
 *       behindAfter: 15m                 # omitted: 15m
 *       enabled: true
 *
 * Ids are required so that a second apply finds what the first one created. The whole file is
 * checked, with every problem named by its path, before anything is sent.
 */
export interface ApplyFile {
  sources: DesiredSource[];
  destinations: DesiredDestination[];
  operatorWebhooks: DesiredOperatorWebhook[];
}

export interface DesiredOperatorWebhook {
  id: string;
  name: string;
  url: string;
  /** Absent: generated when created, kept when updated. */
  secret?: string;
  /** Empty: every type. */
  events: string[];
  /** null: the default. */
  failingBelow: number | null;
  /** Normalised (`15m`); null: the default. */
  behindAfter: string | null;
  enabled: boolean;
  path: string;
}

export interface DesiredSource {
  id: string;
  name: string;
  /** Normalised as the server stores them; absent from the file: [] (any origin). */
  allowedOrigins: string[];
  /** `sources[0]`, for messages. */
  path: string;
}

/**
 * A destination as the file declares it: the settings `destinations get` shows, with the secret
 * itself. Keys absent from the file take the create defaults: unordered, no consent categories,
 * deliver, every call, the default body, POST, the server's retry schedule, one call per request,
 * failover.
 */
export interface DesiredDestination
  extends Pick<
    DestinationView,
    | "id"
    | "name"
    | "sourceIds"
    | "urls"
    | "headers"
    | "signing"
    | "ordering"
    | "consentCategories"
    | "consentMissing"
    | "filter"
    | "mapping"
    | "method"
    | "retry"
    | "batching"
    | "deliveryMode"
    | "enabled"
  > {
  /** Absent: the destination has no shared secret. */
  secret?: string;
  path: string;
}

/** Ids become NATS subject tokens and consumer names (packages/core/src/nats/topology.ts ID_PATTERN). */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_NAME_CHARS = 200;

const SOURCE_KEYS = ["id", "name", "allowedOrigins"];
const DESTINATION_KEYS = [
  "id",
  "name",
  "sources",
  "urls",
  "headers",
  "secret",
  "secretEnv",
  "signing",
  "ordering",
  "consentCategories",
  "consentMissing",
  "filter",
  "mapping",
  "method",
  "retry",
  "batching",
  "deliveryMode",
  "enabled",
];
const OPERATOR_WEBHOOK_KEYS = [
  "id",
  "name",
  "url",
  "secret",
  "secretEnv",
  "events",
  "failingBelow",
  "behindAfter",
  "enabled",
];
const RETRY_KEYS = ["window", "delays"];
const BATCHING_KEYS = ["maxCalls", "maxBytes", "maxWait"];
const FILTER_KEYS = ["types", "events", "expression"];

/** Reads and checks a file (`-` is stdin). Throws InputError listing every problem. */
export async function loadApplyFile(
  file: string,
  env: NodeJS.ProcessEnv = userVariables(),
  stdin: () => Promise<string> = readStdin,
): Promise<ApplyFile> {
  let text: string;
  try {
    text = file === "-" ? await stdin() : await readFile(file, "utf8");
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code === "ENOENT" ? "no such file" : e.code === "EISDIR" ? "is a directory" : e.message;
    throw new InputError(`cannot read ${file}: ${why}`);
  }
  return parseApplyFile(text, file === "-" ? "stdin" : file, env);
}

export function parseApplyFile(
  text: string,
  name: string,
  env: NodeJS.ProcessEnv = userVariables(),
): ApplyFile {
  const lines = new LineCounter();
  if (extname(name).toLowerCase() === ".json") {
    try {
      JSON.parse(text);
    } catch (err) {
      throw new InputError(`${name} is not valid JSON: ${(err as Error).message}`);
    }
  }
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: true });
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!;
    const where = first.linePos ? ` (line ${first.linePos[0].line}, column ${first.linePos[0].col})` : "";
    throw new InputError(`${name} is not valid YAML${where}: ${first.message.split("\n")[0]}`);
  }
  const value: unknown = doc.toJS();
  // A missing key is reported at the line of its closest parent; the file itself has no line.
  const checker = new Checker(env, (path) => {
    for (let n = path.length; n > 0; n--) {
      const node = doc.getIn(path.slice(0, n), true) as Node | undefined;
      if (node?.range) return lines.linePos(node.range[0]).line;
    }
    return undefined;
  });
  const file = checker.file(value);
  if (checker.problems.length > 0) {
    const n = checker.problems.length;
    throw new InputError(
      `${name} has ${n} ${n === 1 ? "problem" : "problems"}; nothing was changed`,
      checker.problems,
    );
  }
  return file;
}

type Path = (string | number)[];

/** `destinations[1].urls[0]`, `destinations[0].headers["X-Team"]` (the server's field syntax). */
function pathText(path: Path): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(p)) out += `[${JSON.stringify(p)}]`;
    else out += out === "" ? p : `.${p}`;
  }
  return out || "(file)";
}

/** One `[3]` or `["X-Team"]` step of a field path. */
const SUFFIX = /^(?:\[(?:(\d+)|("(?:[^"\\]|\\.)*"))\]|\.([A-Za-z_]+))/;

/** Walks the parsed value; every problem is recorded with its path, and checking goes on. */
class Checker {
  readonly problems: InputProblem[] = [];
  readonly #env: NodeJS.ProcessEnv;
  readonly #lineOf: (path: Path) => number | undefined;

  constructor(env: NodeJS.ProcessEnv, lineOf: (path: Path) => number | undefined) {
    this.#env = env;
    this.#lineOf = lineOf;
  }

  problem(path: Path, message: string): void {
    const line = this.#lineOf(path);
    this.problems.push({ path: pathText(path), message: line ? `${message} (line ${line})` : message });
  }

  file(value: unknown): ApplyFile {
    const out: ApplyFile = { sources: [], destinations: [], operatorWebhooks: [] };
    if (value === null || value === undefined) {
      this.problem([], "the file is empty: expected `sources:`, `destinations:` and/or `operatorWebhooks:`");
      return out;
    }
    if (!isObject(value)) {
      this.problem([], "expected a mapping with `sources:`, `destinations:` and/or `operatorWebhooks:`");
      return out;
    }
    this.unknownKeys(value, [], ["sources", "destinations", "operatorWebhooks"]);
    const sources = this.list(value.sources, ["sources"]);
    sources.forEach((s, i) => {
      const src = this.source(s, ["sources", i]);
      if (src) out.sources.push(src);
    });
    const destinations = this.list(value.destinations, ["destinations"]);
    destinations.forEach((d, i) => {
      const dest = this.destination(d, ["destinations", i]);
      if (dest) out.destinations.push(dest);
    });
    this.list(value.operatorWebhooks, ["operatorWebhooks"]).forEach((w, i) => {
      const webhook = this.operatorWebhook(w, ["operatorWebhooks", i]);
      if (webhook) out.operatorWebhooks.push(webhook);
    });
    this.unique(out.sources);
    this.unique(out.destinations);
    this.unique(out.operatorWebhooks);
    return out;
  }

  /**
   * What every resource of the file starts with: a mapping (else a problem and undefined) with no
   * key beyond `keys`, and its id and name (each undefined when wrong: a problem).
   */
  resource(raw: unknown, path: Path, keys: string[], expected: string) {
    if (!isObject(raw)) return void this.problem(path, `expected a mapping ${expected}`);
    this.unknownKeys(raw, path, keys);
    return { value: raw, id: this.id(raw.id, [...path, "id"]), name: this.name(raw.name, [...path, "name"]) };
  }

  operatorWebhook(raw: unknown, path: Path): DesiredOperatorWebhook | undefined {
    const before = this.problems.length;
    const resource = this.resource(raw, path, OPERATOR_WEBHOOK_KEYS, "(id, name, url, …)");
    if (resource === undefined) return undefined;
    const { value, id, name } = resource;
    let url: string | undefined;
    if (typeof value.url !== "string")
      this.problem([...path, "url"], "is required: the URL events are POSTed to");
    else if (this.violations([...path, "url"], operatorUrlViolations(value.url, pathText([...path, "url"]))))
      url = value.url;
    let events: string[] = [];
    if (value.events !== undefined && value.events !== null) {
      if (!Array.isArray(value.events) || value.events.some((e) => typeof e !== "string"))
        this.problem([...path, "events"], "must be a list of event types");
      else if (
        this.violations(
          [...path, "events"],
          eventTypesViolations(value.events, pathText([...path, "events"])),
        )
      )
        events = value.events as string[];
    }
    let failingBelow: number | null = null;
    if (value.failingBelow !== undefined && value.failingBelow !== null) {
      if (typeof value.failingBelow !== "number")
        this.problem([...path, "failingBelow"], "must be a number from 0.01 to 1");
      else if (
        this.violations(
          [...path, "failingBelow"],
          failingBelowViolations(value.failingBelow, pathText([...path, "failingBelow"])),
        )
      )
        failingBelow = value.failingBelow;
    }
    let behindAfter: string | null = null;
    if (value.behindAfter !== undefined && value.behindAfter !== null) {
      const at = [...path, "behindAfter"];
      const ms = this.durationMs(value.behindAfter, at, "30s, 15m or 1h");
      if (ms !== undefined && this.violations(at, behindAfterViolations(ms, pathText(at))))
        behindAfter = formatDuration(ms);
    }
    const enabled = this.enabled(value, path);
    const secret = this.secret(value, path);
    if (secret.ok) {
      const field = [...path, value.secretEnv !== undefined ? "secretEnv" : "secret"];
      this.violations(field, operatorSecretViolations(secret.value, pathText(field)));
    }
    if (this.problems.length > before) return undefined;
    return {
      id: id!,
      name: name!,
      url: url!,
      ...(secret.value !== undefined ? { secret: secret.value } : {}),
      events,
      failingBelow,
      behindAfter,
      enabled,
      path: pathText(path),
    };
  }

  source(raw: unknown, path: Path): DesiredSource | undefined {
    const resource = this.resource(raw, path, SOURCE_KEYS, "with `id` and `name`");
    if (resource === undefined) return undefined;
    const { value, id, name } = resource;
    const allowedOrigins = this.allowedOrigins(value.allowedOrigins, [...path, "allowedOrigins"]);
    if (id === undefined || name === undefined || allowedOrigins === undefined) return undefined;
    return { id, name, allowedOrigins, path: pathText(path) };
  }

  destination(raw: unknown, path: Path): DesiredDestination | undefined {
    const before = this.problems.length;
    const resource = this.resource(raw, path, DESTINATION_KEYS, "(id, name, sources, urls, …)");
    if (resource === undefined) return undefined;
    const { value, id, name } = resource;
    const sourceIds = this.sourceIds(value.sources, [...path, "sources"]);
    const urls = this.urls(value.urls, [...path, "urls"]);
    const headers = this.headers(value.headers, [...path, "headers"]);
    // Absent: segment. Wrong: undefined (a problem), not the default, so that the secret is not
    // checked against a signing the file did not ask for.
    const signing =
      value.signing === undefined ? "segment" : this.word(value, path, "signing", SIGNING.words);
    const ordering = this.word(value, path, "ordering", ORDERING.words) ?? "unordered";
    const consentMissing = this.word(value, path, "consentMissing", CONSENT_MISSING.words) ?? "deliver";
    const consentCategories = this.consentCategories(value.consentCategories, [...path, "consentCategories"]);
    const method = this.word(value, path, "method", METHOD_NAMES) ?? "POST";
    const filter = this.filter(value.filter, [...path, "filter"]);
    const mapping = this.text(value.mapping, [...path, "mapping"]);
    const retry = this.retry(value.retry, [...path, "retry"]);
    const batching = this.batching(value.batching, [...path, "batching"]);
    const deliveryMode = this.word(value, path, "deliveryMode", DELIVERY_MODE.words) ?? "failover";
    const enabled = this.enabled(value, path);
    const secret = this.secret(value, path);
    if (signing && secret.ok) {
      const field = [...path, value.secretEnv !== undefined ? "secretEnv" : "secret"];
      this.violations(field, sharedSecretViolations(secret.value, signing, pathText(field)));
    }
    if (this.problems.length > before || !signing) return undefined;
    return {
      id: id!,
      name: name!,
      sourceIds: sourceIds!,
      urls: urls!,
      headers: headers!,
      ...(secret.value !== undefined ? { secret: secret.value } : {}),
      signing,
      ordering,
      consentCategories: consentCategories!,
      consentMissing,
      filter: filter ?? null,
      mapping: mapping ?? "",
      method,
      retry: retry ?? null,
      batching: batching ?? null,
      deliveryMode,
      enabled,
      path: pathText(path),
    };
  }

  /** An optional key whose value is one of `words`; undefined when absent or wrong (a problem). */
  word<W extends string>(value: Record<string, unknown>, path: Path, key: string, words: readonly W[]) {
    const v = value[key];
    if (v === undefined) return undefined;
    if (typeof v === "string" && (words as readonly string[]).includes(v)) return v as W;
    this.problem([...path, key], `must be one of ${words.join(", ")}`);
    return undefined;
  }

  /** `enabled: true` or `false`; absent: true. */
  enabled(value: Record<string, unknown>, path: Path): boolean {
    if (value.enabled === undefined) return true;
    if (typeof value.enabled === "boolean") return value.enabled;
    this.problem([...path, "enabled"], "must be true or false");
    return true;
  }

  /** `secret:` or `secretEnv:` (resolved now), or neither: no secret. */
  secret(value: Record<string, unknown>, path: Path): { ok: boolean; value?: string } {
    if (value.secret !== undefined && value.secretEnv !== undefined) {
      this.problem([...path, "secretEnv"], "give either `secret` or `secretEnv`, not both");
      return { ok: false };
    }
    if (value.secret !== undefined) {
      if (typeof value.secret === "string" && value.secret !== "") return { ok: true, value: value.secret };
      this.problem([...path, "secret"], "must be a non-empty string (omit it for no secret)");
      return { ok: false };
    }
    if (value.secretEnv !== undefined) {
      const at = [...path, "secretEnv"];
      const name = value.secretEnv;
      if (typeof name !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        this.problem(at, "must be the name of an environment variable");
      } else if (!this.#env[name]) {
        this.problem(at, `environment variable ${name} is not set`);
      } else {
        return { ok: true, value: this.#env[name] };
      }
      return { ok: false };
    }
    return { ok: true };
  }

  list(value: unknown, path: Path): unknown[] {
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) {
      this.problem(path, "expected a list");
      return [];
    }
    return value;
  }

  id(value: unknown, path: Path): string | undefined {
    if (value === undefined) return void this.problem(path, "is required (re-applies find things by id)");
    if (typeof value !== "string" || !ID_PATTERN.test(value)) {
      return void this.problem(path, "must be 1 to 64 letters, digits, '-' or '_'");
    }
    return value;
  }

  name(value: unknown, path: Path): string | undefined {
    if (value === undefined) return void this.problem(path, "is required");
    if (typeof value !== "string" || value.trim() === "")
      return void this.problem(path, "must be a non-empty string");
    if ([...value].length > MAX_NAME_CHARS)
      return void this.problem(path, `at most ${MAX_NAME_CHARS} characters`);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
    if (/[\x00-\x1f\x7f]/.test(value)) return void this.problem(path, "must not contain control characters");
    return value;
  }

  sourceIds(value: unknown, path: Path): string[] | undefined {
    if (value === undefined) return void this.problem(path, "is required: the source ids to connect");
    if (!Array.isArray(value) || value.length === 0)
      return void this.problem(path, "must be a non-empty list of source ids");
    const out: string[] = [];
    value.forEach((v, i) => {
      if (typeof v !== "string" || !ID_PATTERN.test(v)) this.problem([...path, i], "must be a source id");
      else if (out.includes(v)) this.problem([...path, i], `"${v}" is listed twice`);
      else out.push(v);
    });
    return out.length === value.length ? out : undefined;
  }

  urls(value: unknown, path: Path): string[] | undefined {
    if (value === undefined) return void this.problem(path, "is required: 1 to 5 webhook URLs");
    const urls = this.textList(value, path, "URLs");
    return urls && this.violations(path, urlsViolations(urls, pathText(path))) ? urls : undefined;
  }

  /** A source's web origins, normalised as the server stores them (so a re-apply compares equal). */
  allowedOrigins(value: unknown, path: Path): string[] | undefined {
    if (value === undefined || value === null) return [];
    const origins = this.textList(value, path, "origins such as https://shop.example.com");
    return origins && this.violations(path, allowedOriginsViolations(origins, pathText(path)))
      ? normalizeOrigins(origins)
      : undefined;
  }

  consentCategories(value: unknown, path: Path): string[] | undefined {
    if (value === undefined || value === null) return [];
    const categories = this.textList(value, path, "consent category names");
    return categories && this.violations(path, consentCategoriesViolations(categories, pathText(path)))
      ? categories
      : undefined;
  }

  /** `filter: { types, events, expression }`: the parts given; undefined when absent (or wrong: a problem). */
  filter(raw: unknown, path: Path): FilterView | undefined {
    const value = this.section(raw, path, FILTER_KEYS, "types, events and/or expression");
    if (value === undefined) return undefined;
    const out: FilterView = {};
    for (const [key, v] of given(value, ["types", "events"])) {
      const names = this.textList(v, [...path, key], "names");
      if (names && names.length > 0) out[key] = names;
    }
    const expression = this.text(value.expression, [...path, "expression"]);
    if (expression) out.expression = expression;
    // Empty parts are no filter, as the server stores them: a re-apply then finds no change.
    const ok = this.violations(path, filterViolations(out, pathText(path)));
    return ok && Object.keys(out).length > 0 ? out : undefined;
  }

  /**
   * `batching: { maxCalls: 100, maxBytes: 524288, maxWait: 1s }` (each optional: the defaults);
   * `batching: {}` batches with every default. The wait normalised as for retry.
   */
  batching(raw: unknown, path: Path): BatchingView | undefined {
    const value = this.section(raw, path, BATCHING_KEYS, "maxCalls, maxBytes and/or maxWait");
    if (value === undefined) return undefined;
    const out: BatchingView = {};
    for (const [key, v] of given(value, ["maxCalls", "maxBytes"])) {
      if (typeof v === "number" && Number.isInteger(v) && v > 0) out[key] = v;
      else this.problem([...path, key], "must be a whole number above 0");
    }
    if (value.maxWait !== undefined) {
      const ms = this.durationMs(value.maxWait, [...path, "maxWait"], "500ms, 1s or 30s");
      if (ms !== undefined) out.maxWait = formatDuration(ms);
    }
    const names: Record<string, string> = {
      max_calls: "maxCalls",
      max_bytes: "maxBytes",
      max_wait: "maxWait",
    };
    for (const v of batchingViolations(
      {
        maxCalls: out.maxCalls,
        maxBytes: out.maxBytes,
        maxWaitMs: out.maxWait === undefined ? undefined : parseDuration(out.maxWait),
      },
      "",
    )) {
      this.problem([...path, names[v.field.slice(1)] ?? v.field.slice(1)], v.description);
    }
    return out;
  }

  /**
   * `retry: { window: 2h, delays: [10s, 1m] }`: durations as the CLI writes them, normalised ("60s"
   * is "1m") so that a re-apply compares equal; the server checks its bounds.
   */
  retry(raw: unknown, path: Path): RetryView | undefined {
    const value = this.section(raw, path, RETRY_KEYS, "window and/or delays");
    if (value === undefined) return undefined;
    const duration = (v: unknown, at: Path): string | undefined => {
      const ms = this.durationMs(v, at, "30s, 5m or 2h");
      return ms === undefined ? undefined : formatDuration(ms);
    };
    const out: RetryView = {};
    if (value.window !== undefined) {
      const w = duration(value.window, [...path, "window"]);
      if (w) out.window = w;
    }
    if (value.delays !== undefined) {
      if (!Array.isArray(value.delays))
        return void this.problem([...path, "delays"], "must be a list of durations");
      const delays = value.delays.map((v, i) => duration(v, [...path, "delays", i]));
      if (delays.every((d) => d !== undefined) && delays.length > 0) out.delays = delays as string[];
    }
    return Object.keys(out).length > 0 ? out : undefined;
  }

  /**
   * A duration as the CLI writes it (`30s`, `1h30m`), in milliseconds; a problem at `path` when it is
   * not text (the message suggests `examples`) or not a duration.
   */
  durationMs(value: unknown, path: Path, examples: string): number | undefined {
    if (typeof value !== "string") return void this.problem(path, `must be a duration such as ${examples}`);
    try {
      return parseDuration(value);
    } catch (err) {
      return void this.problem(path, (err as Error).message);
    }
  }

  /** An optional JSONata text (a mapping or a filter expression); compiled by the server. */
  text(value: unknown, path: Path): string | undefined {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "string") return void this.problem(path, "must be text (a JSONata expression)");
    return this.violations(path, expressionViolations(value, pathText(path))) ? value : undefined;
  }

  headers(value: unknown, path: Path): Record<string, string> | undefined {
    if (value === undefined || value === null) return {};
    if (!isObject(value)) {
      return void this.problem(path, 'must be a mapping of header name to value ("X-Team: growth")');
    }
    const out: Record<string, string> = {};
    let ok = true;
    for (const [name, v] of Object.entries(value)) {
      if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") out[name] = String(v);
      else {
        this.problem([...path, name], "the value must be text");
        ok = false;
      }
    }
    return this.violations(path, headersViolations(out, pathText(path))) && ok ? out : undefined;
  }

  /** Records the server's rule violations (fields such as `….urls[1]`, `….headers["X-A"]`); true when none. */
  violations(base: Path, list: readonly FieldViolation[]): boolean {
    const prefix = pathText(base);
    for (const v of list) {
      const path = [...base];
      let rest = v.field.startsWith(prefix) ? v.field.slice(prefix.length) : "";
      for (let m = SUFFIX.exec(rest); m && rest !== ""; m = SUFFIX.exec(rest)) {
        path.push(
          m[1] !== undefined ? Number(m[1]) : m[2] !== undefined ? (JSON.parse(m[2]) as string) : m[3]!,
        );
        rest = rest.slice(m[0].length);
      }
      this.problem(path, v.description);
    }
    return list.length === 0;
  }

  /** `value` as a list of text; otherwise undefined, and a problem: "must be a list of `what`". */
  textList(value: unknown, path: Path, what: string): string[] | undefined {
    if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value as string[];
    return void this.problem(path, `must be a list of ${what}`);
  }

  /**
   * An optional mapping of these `keys` (`expected` names them for people): undefined when absent,
   * or when not a mapping (a problem); unknown keys are problems.
   */
  section(value: unknown, path: Path, keys: string[], expected: string): Record<string, unknown> | undefined {
    if (value === undefined || value === null) return undefined;
    if (!isObject(value)) return void this.problem(path, `must be a mapping with ${expected}`);
    this.unknownKeys(value, path, keys);
    return value;
  }

  unknownKeys(value: Record<string, unknown>, path: Path, known: string[]): void {
    for (const key of Object.keys(value)) {
      if (known.includes(key)) continue;
      const near = known.find(
        (k) => k.toLowerCase() === key.toLowerCase() || k === `${key}s` || `${k}s` === key,
      );
      this.problem(
        [...path, key],
        `unknown key${near ? ` (did you mean "${near}"?)` : ""}; expected ${known.join(", ")}`,
      );
    }
  }

  unique(items: { id: string; path: string }[]): void {
    const first = new Map<string, string>();
    for (const item of items) {
      const prev = first.get(item.id);
      if (prev)
        this.problems.push({ path: `${item.path}.id`, message: `"${item.id}" is also the id of ${prev}` });
      else first.set(item.id, item.path);
    }
  }
}

/** The keys among `keys` that `value` gives (not undefined), with their values. */
function given<K extends string>(value: Record<string, unknown>, keys: readonly K[]): [K, unknown][] {
  return keys.flatMap((key) => (value[key] === undefined ? [] : [[key, value[key]] as [K, unknown]]));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
