/**
 * The one configuration schema: every environment variable of every service, with its default
 * and a one-line description. Services read their settings through loadSettings (once, in their
 * composition root); docs/configuration.md's settings tables are rendered from SETTINGS
 * (`npm run docs:config`). One unit per kind: durations `30s`/`5m`/`4h` (or milliseconds), sizes
 * in bytes or `512KiB`/`1GiB`, switches `on`/`off`.
 */
import { CLIENT_SETTINGS, parseDuration } from "@hookpost/contract";
import { z } from "zod";
import { ConfigError } from "../env/read-env.js";
import { parseSecretKeys, type SecretKey } from "../secrets/keyring.js";

/** Who reads a variable: ingest (api), the dispatcher, `npm start`'s launcher, the CLI/client. */
export type Service = "api" | "dispatcher" | "local" | "client";

type Default = string | undefined;
/** A problem with a value: `must be …`. */
class Invalid {
  constructor(readonly message: string) {}
}
const bad = (message: string) => new Invalid(message);
type Check<T> = (text: string) => T | Invalid;

interface Setting<T> {
  services: readonly Service[];
  /** The default as written in the environment; per service when they differ; undefined: unset. */
  default: Default | Partial<Record<Service, Default>>;
  /** Shown in the docs instead of the default (a computed or generated one). */
  shownDefault?: string;
  description: string;
  /** Older names still read (a deprecation warning is logged once). */
  aliases?: readonly string[];
  /** Holds keys: a bad value is never quoted back (in the error line, hence the log). */
  secret?: true;
  check: Check<T>;
}

const define = <T>(s: Setting<T>) => s;

// --- kinds ------------------------------------------------------------------------------------

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

function duration(min = 0, { off = false } = {}): Check<number | undefined> {
  return (text) => {
    if (off && text.trim().toLowerCase() === "off") return undefined;
    let ms: number;
    try {
      ms = parseDuration(text);
    } catch {
      return bad(`must be a duration like 30s, 5m, 4h or milliseconds${off ? ", or off" : ""}`);
    }
    return ms < min ? bad(`must be at least ${formatMin(min)}`) : ms;
  };
}
const formatMin = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);
const durationMs = (min = 0): Check<number> => duration(min) as Check<number>;

function size(min = 1, max = Number.MAX_SAFE_INTEGER): Check<number> {
  return (text) => {
    const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
    const unit = SIZE_UNITS[m?.[2]?.toLowerCase() ?? "?"];
    if (!m || unit === undefined) return bad("must be a size in bytes or like 512KiB, 64MiB, 1GiB");
    const n = Math.round(Number(m[1]) * unit);
    if (n < min) return bad(`must be at least ${min} bytes`);
    if (n > max) return bad(`must be at most ${max} bytes`);
    return n;
  };
}

function int(min = 0, max = Number.MAX_SAFE_INTEGER): Check<number> {
  return (text) => {
    const n = Number(text.trim());
    if (!Number.isInteger(n) || n < min) return bad(`must be an integer >= ${min}`);
    return n <= max ? n : bad(`must be an integer <= ${max}`);
  };
}

const onOff: Check<boolean> = (text) => {
  const v = text.trim().toLowerCase();
  if (["on", "true", "1"].includes(v)) return true;
  if (["off", "false", "0"].includes(v)) return false;
  return bad("must be on or off");
};

const text: Check<string> = (t) => t;

const list: Check<string[]> = (t) =>
  t
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** `host:port`, or `off` (undefined) when `off` is allowed. */
function address(): Check<string>;
function address(options: { off: true }): Check<string | undefined>;
function address({ off = false } = {}): Check<string | undefined> {
  return (t) => {
    if (off && t === "off") return undefined;
    const i = t.lastIndexOf(":");
    const port = t.slice(i + 1);
    if (i <= 0 || !/^\d+$/.test(port) || Number(port) > 65535)
      return bad(`must be host:port (e.g. 0.0.0.0:50051)${off ? " or off" : ""}`);
    return t;
  };
}

/**
 * An absolute http(s) URL without query, fragment or credentials (links and addresses handed to
 * browsers and SDKs); `example` is shown when it does not parse.
 */
function httpUrl(text: string, example: string): URL | Invalid {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    return bad(`must be an absolute URL such as ${example}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return bad("must use http or https");
  if (url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
    return bad("must have no query, fragment or credentials");
  }
  return url;
}

/** An http(s) URL (httpUrl), kept without its trailing slash. */
const publicUrl: Check<string> = (t) => {
  const url = httpUrl(t, "https://collect.example.com");
  return url instanceof Invalid ? url : `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
};

/** `id:base64key` entries (packages/core/src/secrets/keyring.ts). */
const secretKeys: Check<SecretKey[]> = (t) => {
  try {
    return parseSecretKeys(t);
  } catch (err) {
    return bad((err as Error).message);
  }
};

/** An http(s) URL (httpUrl). */
const consoleUrl: Check<string> = (t) => {
  const url = httpUrl(t, "https://hookpost.example.com/console/");
  return url instanceof Invalid ? url : url.toString();
};

/**
 * CSP host sources (`https://app.example.com`, `https://*.example.com:8443`, `app.example.com`) or
 * `'self'`. Nothing that widens to every site (`*`, `https:`), and nothing that could end the
 * directive (`;`, quotes, spaces): the value is written into a header.
 */
const FRAME_ANCESTOR =
  /^(?:'self'|(?:https?:\/\/)?(?:\*\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::(?:\d{1,5}|\*))?)$/;
const frameAncestors: Check<string[]> = (t) => {
  const entries = list(t) as string[];
  const wrong = entries.find((e) => !FRAME_ANCESTOR.test(e));
  if (wrong !== undefined) {
    return bad(
      `has "${wrong.slice(0, 80)}": use hosts such as https://app.example.com or https://*.example.com, or 'self', comma-separated`,
    );
  }
  return entries;
};

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const logLevel: Check<string> = (t) =>
  LOG_LEVELS.includes(t) ? t : bad(`must be one of ${LOG_LEVELS.join(", ")}`);

const BOTH = ["api", "dispatcher"] as const;
const NATS_DEFAULT = "nats://127.0.0.1:4222";
const GIB = "1GiB";

// --- the variables ----------------------------------------------------------------------------

export const SETTINGS = {
  // Shared by ingest and dispatcher.
  NATS_URL: define({
    services: [...BOTH, "local"],
    default: { api: NATS_DEFAULT, dispatcher: NATS_DEFAULT, local: undefined },
    shownDefault: "`nats://127.0.0.1:4222`; `npm start`: unset starts a nats-server",
    description: "NATS server(s), comma-separated. Services wait for it at start and reconnect forever",
    check: text,
  }),
  LOG_LEVEL: define({
    services: BOTH,
    default: "info",
    description: "pino level: `fatal` … `trace`, `silent`",
    check: logLevel,
  }),
  RETRY_WINDOW: define({
    services: BOTH,
    default: "4h",
    description: "how long a delivery is retried",
    check: durationMs(),
  }),
  RETRY_MAX_DELAY: define({
    services: BOTH,
    default: "15m",
    description: "longest wait between two attempts",
    check: durationMs(),
  }),
  EVENTS_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description:
      "EVENTS stream size; when full, new calls get `RESOURCE_EXHAUSTED` (old ones are never dropped)",
    check: size(),
  }),
  DELIVERIES_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description: "DELIVERIES stream size; when full, routing waits and EVENTS fills behind it",
    check: size(),
  }),
  ORDERED_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description: "ORDERED stream size (calls to `PER_USER` destinations); when full, routing waits",
    check: size(),
  }),
  DEAD_LETTER_MAX_AGE: define({
    services: BOTH,
    default: "14d",
    description: "how long dead letters are kept",
    check: durationMs(),
  }),
  DEDUP_WINDOW: define({
    services: BOTH,
    default: "10m",
    description: "a repeated message id within this window is stored once",
    check: durationMs(),
  }),
  STREAM_REPLICAS: define({
    services: BOTH,
    default: "1",
    description: "JetStream replicas of streams and buckets (3 on a cluster)",
    check: int(1),
  }),
  ATTEMPT_LOG_MAX_AGE: define({
    services: BOTH,
    default: "3d",
    description: "how long the attempt log keeps records",
    check: durationMs(),
  }),
  ATTEMPT_LOG_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description: "attempt log size; when full, the oldest records are dropped first",
    check: size(),
  }),
  DEAD_LETTER_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description: "DEAD stream size; when full, the oldest dead letters are dropped first",
    check: size(),
  }),
  AUDIT_LOG_MAX_AGE: define({
    services: BOTH,
    default: "90d",
    description: "how long the audit log keeps the record of each admin write (no API deletes one sooner)",
    check: durationMs(),
  }),
  AUDIT_LOG_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description:
      "audit log size; when full, admin writes get `RESOURCE_EXHAUSTED` (nothing changed; old records are never dropped for room)",
    check: size(),
  }),
  CONFIG_MAX_BYTES: define({
    services: BOTH,
    default: "256MiB",
    description: "configuration bucket size; when full, admin writes get `RESOURCE_EXHAUSTED`",
    check: size(),
  }),
  USER_INDEX_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description:
      "user index size (which sources saw each user, for deletions); when full, calls of new users get `RESOURCE_EXHAUSTED`",
    check: size(),
  }),
  MEMBERSHIPS_MAX_BYTES: define({
    services: BOTH,
    default: GIB,
    description:
      "stored audience / computed trait memberships; when full, a sync storing a new one gets `RESOURCE_EXHAUSTED`",
    check: size(),
  }),
  SECRETS_KEYS: define({
    services: [...BOTH, "local"],
    default: undefined,
    shownDefault: "unset: stored in plain text (`npm start` generates a key, see `SECRETS_KEYS_FILE`)",
    description:
      "keys that encrypt destinations' shared secrets and header values at rest (AES-256-GCM): comma-separated `id:base64key` entries, each key 32 bytes (`openssl rand -base64 32`); the first encrypts, every one decrypts (rotation: docs/operations.md#rotating-the-secrets-key)",
    secret: true,
    check: secretKeys,
  }),
  SECRETS_KEYS_FILE: define({
    services: [...BOTH, "local"],
    default: undefined,
    shownDefault: "unset (`npm start`: `.data/secrets-keys`, generated on first run)",
    description:
      "a file holding the `SECRETS_KEYS` entries (separated by commas or new lines), read at start; set one of the two, not both",
    check: text,
  }),
  OPS_ADDR: define({
    services: BOTH,
    default: { api: "127.0.0.1:9090", dispatcher: "127.0.0.1:9091" },
    shownDefault: "`127.0.0.1:9090` (ingest) / `127.0.0.1:9091` (dispatcher)",
    description:
      "`/healthz`, `/readyz`, `/metrics`; `off` disables. Loopback only unless set (compose sets `0.0.0.0`)",
    check: address({ off: true }),
  }),
  OPS_MAX_CONNECTIONS: define({
    services: BOTH,
    default: "32",
    description: "open connections of the ops port; more are closed at once",
    check: int(1),
  }),
  OPS_IDLE_TIMEOUT: define({
    services: BOTH,
    default: "10s",
    description: "an ops connection that sends nothing for this long (before or between requests) is closed",
    check: durationMs(100),
  }),
  OPS_REQUEST_TIMEOUT: define({
    services: BOTH,
    default: "10s",
    description: "an ops request must arrive complete within this",
    check: durationMs(100),
  }),
  OTEL_EXPORTER_OTLP_ENDPOINT: define({
    services: BOTH,
    default: undefined,
    description: "OTLP/HTTP collector base URL (`/v1/traces` is appended); set: tracing on",
    check: text,
  }),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: define({
    services: BOTH,
    default: undefined,
    description: "full traces URL; wins over the one above; set: tracing on",
    check: text,
  }),
  OTEL_EXPORTER_OTLP_PROTOCOL: define({
    services: BOTH,
    default: undefined,
    description: "`http/protobuf` or `http/json` (`grpc` is refused: use the collector's OTLP/HTTP port)",
    check: text,
  }),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: define({
    services: BOTH,
    default: undefined,
    description: "the protocol for traces only; wins over the one above",
    check: text,
  }),
  OTEL_TRACES_EXPORTER: define({
    services: BOTH,
    default: undefined,
    description: "`otlp`: tracing on (endpoint `http://localhost:4318`); `none`: off",
    check: text,
  }),
  OTEL_SDK_DISABLED: define({
    services: BOTH,
    default: undefined,
    description: "`true`: tracing off whatever else is set",
    check: text,
  }),
  OTEL_SERVICE_NAME: define({
    services: BOTH,
    default: undefined,
    shownDefault: "`hookpost-ingest` / `hookpost-dispatcher`",
    description: "service name of the spans (read by the OpenTelemetry SDK)",
    check: text,
  }),
  OTEL_TRACES_SAMPLER: define({
    services: BOTH,
    default: undefined,
    shownDefault: "`parentbased_always_on`",
    description: "which traces are kept, e.g. `parentbased_traceidratio` (read by the OpenTelemetry SDK)",
    check: text,
  }),
  OTEL_TRACES_SAMPLER_ARG: define({
    services: BOTH,
    default: undefined,
    description: "the sampler's argument, e.g. `0.1` (read by the OpenTelemetry SDK)",
    check: text,
  }),

  // Ingest.
  INGEST_ADDR: define({
    services: ["api", "local"],
    default: { api: "0.0.0.0:50051", local: "127.0.0.1:50051" },
    description: "gRPC listen address (port `0` picks a free one)",
    check: address(),
  }),
  ADMIN_TOKEN: define({
    services: ["api", "local"],
    default: undefined,
    shownDefault: "generated per run (`npm start`: kept in `.data/admin-token`)",
    description:
      "Bearer token for `AdminService` and `Delete`; when unset a random one is generated and not logged",
    check: text,
  }),
  TLS_CERT_FILE: define({
    services: ["api"],
    default: undefined,
    description: "with `TLS_KEY_FILE`: gRPC over TLS (both or neither)",
    check: text,
  }),
  TLS_KEY_FILE: define({
    services: ["api"],
    default: undefined,
    description: "with `TLS_CERT_FILE`: gRPC over TLS (both or neither)",
    check: text,
  }),
  ERASURE_INTERVAL: define({
    services: ["api"],
    default: "15s",
    description:
      "how often pending deletion requests are erased from the stores (one pass over memberships, dead letters, attempt log and pending calls)",
    check: durationMs(100),
  }),
  ERASURE_SETTLE: define({
    services: ["api"],
    default: "1m",
    description:
      "a deletion is done after a pass that found nothing, started at least this long after the request (deliveries in flight finish first)",
    check: durationMs(),
  }),
  DELETION_STATUS_MAX_AGE: define({
    services: ["api"],
    default: "30d",
    description:
      "how long a deletion request and its status (`GetDeletion`) are kept; they hold user hashes, no ids",
    check: durationMs(60_000),
  }),
  PUBLISH_TIMEOUT: define({
    services: ["api"],
    default: "8s",
    description:
      "how long JetStream has to confirm a call before the answer is `UNAVAILABLE` (retried within it through a leader election)",
    aliases: ["PUBLISH_TIMEOUT_MS"],
    check: durationMs(100),
  }),
  MAX_BATCH_CALLS: define({
    services: ["api"],
    default: "2500",
    description:
      "calls one batch may carry (gRPC `Batch`, HTTP `/v1/batch` and `/v1/import`); more is `INVALID_ARGUMENT` / 400",
    check: int(1),
  }),
  STREAM_CHECK_INTERVAL: define({
    services: ["api"],
    default: "10s",
    description: "how often the streams' bytes and limits are read (metrics, bucket limits)",
    check: durationMs(1),
  }),
  HTTP_ADDR: define({
    services: ["api", "local"],
    default: { api: "0.0.0.0:8080", local: "127.0.0.1:8080" },
    description:
      "the HTTP listener: Segment-compatible API (`/v1/*`), console (`/console/`), Connect `AdminService`; `off` disables",
    check: address({ off: true }),
  }),
  HTTP_MAX_BODY_BYTES: define({
    services: ["api"],
    default: "500KiB",
    description:
      "a request body, as sent and once gunzipped, is at most this large (at most 500 KiB, the batch limit); over it: 413",
    check: size(1024),
  }),
  HTTP_MAX_CONNECTIONS: define({
    services: ["api"],
    default: "1024",
    description:
      "open HTTP connections; when full, the one waiting longest for headers or body is closed to let a newcomer in",
    check: int(1),
  }),
  HTTP_MAX_CONNECTIONS_PER_IP: define({
    services: ["api"],
    default: "64",
    description: "open HTTP connections of one client address (IPv6: one /64); more are closed at once",
    check: int(1),
  }),
  HTTP_HEADERS_TIMEOUT: define({
    services: ["api"],
    default: "10s",
    description: "time a client has to send its request headers (then 408, connection closed)",
    check: durationMs(),
  }),
  HTTP_REQUEST_TIMEOUT: define({
    services: ["api"],
    default: "30s",
    description: "time a client has to send a whole request (headers and body)",
    check: durationMs(),
  }),
  HTTP_KEEPALIVE_TIMEOUT: define({
    services: ["api"],
    default: "5s",
    description: "how long an idle keep-alive connection stays open",
    check: durationMs(),
  }),
  HTTP_PUBLIC_URL: define({
    services: ["api"],
    default: undefined,
    shownDefault: "the request's `Host`, over http",
    description:
      "where browsers and apps reach the HTTP API (e.g. `https://collect.example.com` behind a TLS proxy): `/v1/projects/<write key>/settings` answers it as the SDKs' `apiHost` and `protocol`",
    check: publicUrl,
  }),
  CONSOLE_URL: define({
    services: ["api"],
    default: undefined,
    description:
      "the console's address as its users reach it (e.g. `https://hookpost.example.com/console/`): portal link URLs start with it; unset: they are the path `/console/#portal=…`",
    check: consoleUrl,
  }),
  CONSOLE_FRAME_ANCESTORS: define({
    services: ["api"],
    default: undefined,
    shownDefault: "unset: framed nowhere",
    description:
      "sites that may show the console in an iframe (e.g. a portal link in a customer app), comma-separated hosts such as `https://app.example.com`, `https://*.example.com`, or `'self'`; sent as `Content-Security-Policy: frame-ancestors`. Unset: `frame-ancestors 'none'` and `X-Frame-Options: DENY`",
    check: frameAncestors,
  }),
  GRPC_MAX_CONNECTIONS: define({
    services: ["api"],
    default: "1000",
    description: "open gRPC TCP connections; more are closed at once",
    check: int(1),
  }),
  GRPC_HANDSHAKE_TIMEOUT: define({
    services: ["api"],
    default: "10s",
    description: "a connection must complete its TLS and HTTP/2 handshake within this",
    check: durationMs(1),
  }),
  GRPC_MAX_CONCURRENT_STREAMS: define({
    services: ["api"],
    default: "100",
    description: "calls at once on one connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`)",
    check: int(1),
  }),
  GRPC_MAX_CONNECTION_IDLE: define({
    services: ["api"],
    default: "5m",
    description: "a connection without calls for this long is closed (GOAWAY)",
    check: durationMs(1),
  }),
  GRPC_MAX_CONNECTION_AGE: define({
    services: ["api"],
    default: "1h",
    description: "a connection is asked to go away after this long (±10%)",
    check: durationMs(1),
  }),
  GRPC_MAX_CONNECTION_AGE_GRACE: define({
    services: ["api"],
    default: "10m",
    description: "… and closed this long after, calls still running or not",
    check: durationMs(1),
  }),
  GRPC_KEEPALIVE_TIME: define({
    services: ["api"],
    default: "2h",
    description: "the server pings a quiet connection this often",
    check: durationMs(1),
  }),
  GRPC_KEEPALIVE_TIMEOUT: define({
    services: ["api"],
    default: "20s",
    description: "… and closes it when the ping is not answered within this",
    check: durationMs(1),
  }),
  GRPC_MIN_PING_INTERVAL: define({
    services: ["api"],
    default: "5m",
    description: "client keepalive pings closer together than this while no call runs are strikes",
    check: durationMs(1),
  }),
  GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS: define({
    services: ["api"],
    default: "off",
    description: "`on`: client pings without a call are allowed (otherwise at most one per 2 h)",
    check: onOff,
  }),
  GRPC_MAX_PING_STRIKES: define({
    services: ["api"],
    default: "2",
    description: "more strikes close the connection (GOAWAY `ENHANCE_YOUR_CALM`)",
    check: int(0),
  }),
  SYNC_MAX_CONCURRENT: define({
    services: ["api"],
    default: "16",
    description:
      "syncs (`SyncAudience`, `SyncComputedTrait`) running at once; more answer `RESOURCE_EXHAUSTED`",
    check: int(1),
  }),
  SYNC_MAX_PER_SOURCE: define({
    services: ["api"],
    default: "4",
    description: "syncs running at once for one source (write key)",
    check: int(1),
  }),
  SYNC_RUN_BYTES: define({
    services: ["api"],
    default: "4MiB",
    description: "in-memory sort run of one sync; larger member lists spill to disk in runs of this size",
    check: size(64 * 1024),
  }),
  SYNC_MEMORY_BYTES: define({
    services: ["api"],
    default: "512MiB",
    description: "memory budget of all running syncs; each reserves 2 × `SYNC_RUN_BYTES` + 24 MiB",
    check: size(),
  }),
  SYNC_IDLE_TIMEOUT: define({
    services: ["api"],
    default: "60s",
    description: "a sync stream that sends nothing for this long ends with `DEADLINE_EXCEEDED`",
    check: durationMs(100),
  }),
  SYNC_TMP_DIR: define({
    services: ["api"],
    default: undefined,
    shownDefault: "`<os tmpdir>/hookpost-sync`",
    description: "the syncs' temporary files, one folder per sync, removed when it ends",
    check: text,
  }),
  SOURCE_MAX_PENDING_BYTES: define({
    services: ["api"],
    default: undefined,
    shownDefault: "`min(64MiB, min(EVENTS_MAX_BYTES, DELIVERIES_MAX_BYTES) / 16)`",
    description:
      "bytes of one source's calls accepted and not finished; over it `429` / `RESOURCE_EXHAUSTED`",
    check: size(),
  }),
  SOURCE_MAX_RATE: define({
    services: ["api"],
    default: "10000",
    description: "calls per second one source may send to one ingest replica (a batch counts its calls)",
    check: int(1),
  }),
  SOURCE_MAX_BURST: define({
    services: ["api"],
    default: "20000",
    description: "calls one source may send at once above its rate",
    check: int(1),
  }),
  SOURCE_MAX_USERS: define({
    services: ["api"],
    default: undefined,
    shownDefault: "`USER_INDEX_MAX_BYTES / 4 / 200` (1 342 177 for 1 GiB)",
    description:
      "users (distinct user ids) one source may have in the user index; at it, calls of its new users get `429` / `RESOURCE_EXHAUSTED`, its known users' are accepted",
    check: int(1),
  }),
  SOURCE_MAX_MEMBERSHIP_BYTES: define({
    services: ["api"],
    default: undefined,
    shownDefault: "`MEMBERSHIPS_MAX_BYTES / 4`",
    description:
      "stored audience / computed trait memberships of one source; a sync that would go over it gets `429` / `RESOURCE_EXHAUSTED`, its stored membership unchanged",
    check: size(),
  }),
  SOURCE_MAX_AUDIT_BYTES: define({
    services: ["api"],
    default: undefined,
    shownDefault: "`AUDIT_LOG_MAX_BYTES / 16`",
    description:
      "audit log taken by one source's portal links (their writes' records); over it their writes get `429` / `RESOURCE_EXHAUSTED` until old records age out; the operator's writes are never held to it",
    check: size(),
  }),
  SOURCE_QUOTA_REFRESH: define({
    services: ["api"],
    default: "1s",
    description: "how often a source's pending bytes are recounted",
    check: durationMs(),
  }),

  // Dispatcher.
  SOURCE_MAX_DEAD_LETTER_BYTES: define({
    services: ["dispatcher"],
    default: undefined,
    shownDefault: "`DEAD_LETTER_MAX_BYTES / 16`",
    description:
      "dead letters of one source's destinations on DEAD kept once DEAD is 3/4 full; then the sources over it drop their oldest (counted) until DEAD is back under 3/4, so one source's failing endpoints never push out other sources' dead letters, and nothing is dropped while DEAD has room",
    check: size(),
  }),
  WEBHOOK_TIMEOUT: define({
    services: ["dispatcher"],
    default: "5s",
    description: "per request (headers and body); then it is a timeout, logged and retried",
    aliases: ["WEBHOOK_TIMEOUT_MS"],
    check: durationMs(1),
  }),
  RETRY_BASE_DELAY: define({
    services: ["dispatcher"],
    default: "1s",
    description: "first retry delay; doubles per attempt (with jitter) up to `RETRY_MAX_DELAY`",
    check: durationMs(1),
  }),
  WEBHOOK_ALLOWED_CIDRS: define({
    services: ["dispatcher", "local"],
    default: { dispatcher: "", local: "127.0.0.0/8,::1/128" },
    shownDefault: "empty (`npm start`: `127.0.0.0/8,::1/128`)",
    description: "CIDRs the SSRF guard lets through, e.g. `10.0.0.0/8,127.0.0.0/8`",
    check: list,
  }),
  WEBHOOK_CA_FILE: define({
    services: ["dispatcher"],
    default: undefined,
    description: "PEM file of extra trusted CAs (added to the default roots)",
    check: text,
  }),
  ACK_WAIT: define({
    services: ["dispatcher"],
    default: "30s",
    description:
      "JetStream ack wait of delivery consumers; a replica that dies mid-delivery hands the message on after this",
    check: durationMs(1000),
  }),
  DELIVERY_CONCURRENCY: define({
    services: ["dispatcher"],
    default: "16",
    description: "concurrent deliveries per destination per replica",
    check: int(1),
  }),
  DELIVERY_MAX_ACK_PENDING: define({
    services: ["dispatcher"],
    default: "1000",
    description: "unacknowledged deliveries (in flight or waiting for a retry) per destination",
    check: int(1),
  }),
  DELIVERY_PARTITIONS: define({
    services: ["dispatcher"],
    default: "8",
    description:
      "shared-lane partitions per class (destinations that answer, all others): 2P consumers `part_<p>`; keep it the same on every replica (docs/design/delivery-at-scale.md)",
    check: int(1, 256),
  }),
  DELIVERY_MAX_CONNECTIONS: define({
    services: ["dispatcher"],
    default: "512",
    description:
      "requests in flight (and sockets) per dispatcher replica over all destinations; a quarter is kept for destinations that answer",
    check: int(4),
  }),
  BREAKER_FAILURES: define({
    services: ["dispatcher"],
    default: "5",
    description:
      "consecutive timeouts or retryable failures that open a destination's circuit breaker (its calls then wait in its lane)",
    check: int(1),
  }),
  LANE_IDLE: define({
    services: ["dispatcher"],
    default: "30s",
    description: "an empty lane's consumer is deleted after this",
    check: durationMs(1000),
  }),
  LANE_SWEEP_INTERVAL: define({
    services: ["dispatcher"],
    default: "5s",
    description: "how often lanes holding parked calls are checked for a consumer",
    check: durationMs(100),
  }),
  STRANDED_CHECK_INTERVAL: define({
    services: ["dispatcher"],
    default: "10s",
    description:
      "how often each partition is checked for messages its consumer no longer counts (a nats-server 2.9 fault after leader changes); a consumer found so twice is created again (lanes are checked by the lane sweep)",
    check: durationMs(100),
  }),
  ORDERED_PARTITIONS: define({
    services: ["dispatcher"],
    default: "32",
    description:
      "units of `PER_USER` delivery work, each owned by one dispatcher replica at a time; the same on every replica",
    check: int(1, 1024),
  }),
  ROUTER_CONCURRENCY: define({
    services: ["dispatcher"],
    default: "64",
    description: "events fanned out at once per replica",
    check: int(1),
  }),
  DIRECT_DELIVERY: define({
    services: ["dispatcher"],
    default: "on",
    description:
      "the router makes the first attempt itself for destinations that answer fast (on average within 250 ms, breaker closed, a slot free), without storing the delivery on DELIVERIES first; `off`: every delivery goes through DELIVERIES (docs/design/delivery-at-scale.md section 6)",
    check: onOff,
  }),
  PULL_EXPIRES: define({
    services: ["dispatcher"],
    default: "5s",
    description: "long-poll duration of a pull request",
    check: durationMs(1000),
  }),
  SHUTDOWN_GRACE: define({
    services: ["dispatcher"],
    default: "10s",
    description: "on SIGTERM, how long in-flight deliveries may finish before they are handed back",
    check: durationMs(),
  }),
  AUTO_DISABLE_AFTER: define({
    services: ["dispatcher"],
    default: "24h",
    description:
      "pause a destination whose every attempt failed for this long (its calls are kept); `off` never does",
    check: duration(0, { off: true }),
  }),
  ALERT_CHECK_INTERVAL: define({
    services: ["dispatcher"],
    default: "15s",
    description:
      "operational webhooks: how often the replica that watches destinations looks for failing, recovered and behind ones (docs/operations.md#alerting)",
    check: durationMs(100),
  }),
  ALERT_HEALTH_WINDOW: define({
    services: ["dispatcher"],
    default: "5m",
    description:
      "operational webhooks: the success rate that says failing or recovered is counted over this window",
    check: durationMs(1000),
  }),
  ALERT_MIN_ATTEMPTS: define({
    services: ["dispatcher"],
    default: "5",
    description:
      "operational webhooks: a destination with fewer attempts in the window is never called failing",
    check: int(1),
  }),
  ALERT_MIN_INTERVAL: define({
    services: ["dispatcher"],
    default: "5m",
    description:
      "operational webhooks: at most one event per destination, operator webhook and condition (failing, behind) in this time: a flapping destination does not flood",
    check: durationMs(),
  }),
  ALERT_DEAD_LETTER_WINDOW: define({
    services: ["dispatcher"],
    default: "5m",
    description:
      "operational webhooks: dead letters are counted per destination over windows this long, one `dead_letter.created` per destination and window",
    check: durationMs(1000),
  }),
  ALERT_BEHIND_LOOKUPS: define({
    services: ["dispatcher"],
    default: "500",
    description:
      "operational webhooks: lookups of pending calls per check at most (one per subject holding calls of a destination; the rest in later checks)",
    check: int(1),
  }),
  ATTEMPT_LOG: define({
    services: ["dispatcher"],
    default: "on",
    description: "record every attempt, routing and dead letter in the attempt log (`off`: none)",
    check: onOff,
  }),
  ATTEMPT_LOG_BODIES: define({
    services: ["dispatcher"],
    default: "on",
    description: "keep the signed request body in attempt records (`off` for privacy)",
    check: onOff,
  }),
  DEAD_LETTER_BODIES: define({
    services: ["dispatcher"],
    default: "on",
    description:
      "keep the webhook body in dead letters (`off`: metadata only; a replay then takes the body from the attempt log's routing record when `ATTEMPT_LOG_BODIES` kept it, else skips the letter)",
    check: onOff,
  }),

  // npm start.
  INGEST_OPS_ADDR: define({
    services: ["local"],
    default: "127.0.0.1:9090",
    description: "ingest's `OPS_ADDR`",
    check: address({ off: true }),
  }),
  DISPATCHER_OPS_ADDR: define({
    services: ["local"],
    default: "127.0.0.1:9091",
    description: "the dispatcher's `OPS_ADDR`",
    check: address({ off: true }),
  }),
  DEMO_RECEIVER_ADDR: define({
    services: ["local"],
    default: "127.0.0.1:4000",
    description: "the demo webhook receiver; `off` for none",
    check: address({ off: true }),
  }),
  HOOKPOST_DATA_DIR: define({
    services: ["local"],
    default: ".data",
    description: "NATS data and the admin token (relative to the repository)",
    check: text,
  }),
  HOOKPOST_VERBOSE: define({
    services: ["local"],
    default: "off",
    description: "`on`: every log line of the services, not only the readable ones",
    check: onOff,
  }),
} as const;

export type SettingName = keyof typeof SETTINGS;
type Value<K extends SettingName> = Exclude<ReturnType<(typeof SETTINGS)[K]["check"]>, Invalid>;
/** Every variable, parsed; only the ones of the service asked for are filled in. */
export type Settings = { [K in SettingName]: Value<K> };

/** The default of a variable for a service, as written in the environment. */
export function defaultFor(name: SettingName, service: Service): Default {
  const d = SETTINGS[name].default as Setting<unknown>["default"];
  return typeof d === "object" ? d[service] : d;
}

const warned = new Set<string>();

/** Called once per deprecated name that is set (default: a line on stderr). */
export type DeprecationWarn = (oldName: string, newName: string) => void;

const stderrWarn: DeprecationWarn = (oldName, newName) =>
  process.stderr.write(`${JSON.stringify({ level: 40, msg: `${oldName} is deprecated: use ${newName}` })}\n`);

function zodSchema(service: Service) {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, s] of Object.entries(SETTINGS) as [SettingName, Setting<unknown>][]) {
    if (!s.services.includes(service)) continue;
    const fallback = defaultFor(name, service);
    shape[name] = z
      .string()
      .optional()
      .transform((raw, ctx) => {
        const value = raw ?? fallback;
        if (value === undefined) return undefined;
        const out = s.check(value);
        if (out instanceof Invalid) {
          const got = s.secret ? "" : `, got "${value}"`;
          ctx.addIssue({ code: "custom", message: `${out.message}${got}` });
          return z.NEVER;
        }
        return out;
      });
  }
  return z.object(shape);
}

/**
 * Parses and checks the variables of one service. Empty counts as unset. A bad value throws a
 * ConfigError of one line naming the variable (the service prints it and exits).
 */
export function loadSettings(
  service: Service,
  env: Record<string, string | undefined> = process.env,
  warn: DeprecationWarn = stderrWarn,
): Settings {
  const input: Record<string, string> = {};
  /** Where each value came from: the variable's name, or the deprecated one it was read from. */
  const source: Record<string, string> = {};
  for (const [name, s] of Object.entries(SETTINGS) as [SettingName, Setting<unknown>][]) {
    if (!s.services.includes(service)) continue;
    const names = [name, ...(s.aliases ?? [])];
    for (const n of names) {
      const v = env[n];
      if (v === undefined || v === "") continue;
      input[name] = v;
      source[name] = n;
      if (n !== name && !warned.has(n)) {
        warned.add(n);
        warn(n, name);
      }
      break;
    }
  }
  const result = zodSchema(service).safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const name = String(issue.path[0]);
    throw new ConfigError(`${source[name] ?? name} ${issue.message}`);
  }
  return result.data as Settings;
}

/** The process environment, handed on as a whole (child processes, the OpenTelemetry SDK). */
export function processEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}

// --- docs -------------------------------------------------------------------------------------

const GROUPS: { title: string; services: readonly Service[]; shared?: true }[] = [
  { title: "Shared by ingest and dispatcher", services: BOTH, shared: true },
  { title: "Ingest (`npm run ingest`)", services: ["api"] },
  { title: "Dispatcher (`npm run dispatcher`)", services: ["dispatcher"] },
  { title: "`npm start` (the local launcher)", services: ["local"] },
  { title: "CLI and client library", services: ["client"] },
];

function groupOf(s: Setting<unknown>, group: (typeof GROUPS)[number]): boolean {
  const shared = BOTH.every((b) => s.services.includes(b));
  if (group.shared) return shared;
  const service = group.services[0]!;
  return s.services.includes(service) && !(shared && service !== "local");
}

const cell = (t: string) => t.replaceAll("|", "\\|");

/** The `## Settings` section of docs/configuration.md, rendered from the schema. */
export function renderSettingsDocs(): string {
  const out: string[] = [
    "## Settings",
    "",
    "<!-- Rendered from packages/core/src/config/schema.ts by `npm run docs:config`; do not edit by hand. -->",
    "",
    "Durations are written `30s`, `5m`, `4h`, `1h30m` (or milliseconds), sizes in bytes or `512KiB`, `64MiB`,",
    "`1GiB`, switches `on`/`off`. Empty counts as unset. A bad value stops the service with one line naming",
    "the variable. Stream settings are shared: set them alike on every service.",
  ];
  for (const group of GROUPS) {
    out.push("", `${group.title}:`, "", "| variable | default | meaning |", "|---|---|---|");
    const rows: [string, string | undefined, string][] =
      group.services[0] === "client"
        ? Object.entries(CLIENT_SETTINGS).map(([name, s]) => [name, s.default, s.description])
        : (Object.entries(SETTINGS) as [SettingName, Setting<unknown>][])
            .filter(([, s]) => groupOf(s, group))
            .map(([name, s]) => {
              const service = group.shared ? "api" : group.services[0]!;
              const shown =
                s.shownDefault ??
                (defaultFor(name, service) === undefined ? "unset" : `\`${defaultFor(name, service)}\``);
              const was = s.aliases?.length
                ? ` (formerly ${s.aliases.map((a) => `\`${a}\`, milliseconds`).join(", ")})`
                : "";
              return [name, shown, `${s.description}${was}`];
            });
    for (const [name, d, description] of rows) {
      const shown =
        d === undefined
          ? "unset"
          : d.startsWith("`") || d.startsWith("unset") || d.startsWith("empty") || d.startsWith("generated")
            ? d
            : `\`${d}\``;
      out.push(`| \`${name}\` | ${cell(shown)} | ${cell(description)} |`);
    }
  }
  return `${out.join("\n")}\n`;
}
