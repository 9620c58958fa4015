import { durationMs, type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import {
  type BatchingView,
  batchingView,
  type FilterView,
  filterView,
  formatDuration,
  methodOf,
  type RetryView,
  retryView,
} from "@hookpost/contract";
import {
  ConsentMissing,
  type DeadLetter,
  DeliveryMode,
  type Destination,
  type OperatorWebhook,
  Ordering,
  Signing,
  type Source,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";

/**
 * A proto enum and the CLI's words for it (the keys of `values`; the first is the default), both
 * ways; a value or word not listed reads as the default.
 */
function enumWords<W extends string, E>(values: Record<W, E>) {
  const all = Object.entries(values) as [W, E][];
  const first = all[0]!;
  return {
    words: all.map(([w]) => w) as readonly W[],
    name: (e: E): W => (all.find(([, v]) => v === e) ?? first)[0],
    value: (w: W): E => (all.find(([n]) => n === w) ?? first)[1],
  };
}

/** The words of an enumWords table, as a type. */
type WordOf<T extends { words: readonly string[] }> = T["words"][number];

/** The CLI's words for the signing modes (flags, apply files, output). */
export const SIGNING = enumWords({
  segment: Signing.SEGMENT,
  "standard-webhooks": Signing.STANDARD_WEBHOOKS,
  "standard-webhooks-ed25519": Signing.STANDARD_WEBHOOKS_ED25519,
});
export type SigningName = WordOf<typeof SIGNING>;

/** The CLI's words for delivery order (flags, apply files, output). */
export const ORDERING = enumWords({ unordered: Ordering.UNORDERED, "per-user": Ordering.PER_USER });
export type OrderingName = WordOf<typeof ORDERING>;

/** The CLI's words for what a call without a consent object gets (flags, apply files, output). */
export const CONSENT_MISSING = enumWords({ deliver: ConsentMissing.DELIVER, filter: ConsentMissing.FILTER });
export type ConsentMissingName = WordOf<typeof CONSENT_MISSING>;

/** The CLI's words for how a destination with several URLs delivers (apply files, output). */
export const DELIVERY_MODE = enumWords({ failover: DeliveryMode.FAILOVER, "fan-out": DeliveryMode.FAN_OUT });
export type DeliveryModeName = WordOf<typeof DELIVERY_MODE>;

/** The HTTP methods a destination may use (flags, apply files, output). */
export const METHOD_NAMES = ["POST", "PUT", "PATCH"] as const;
export type MethodName = (typeof METHOD_NAMES)[number];

/** Filters and retry schedules in the words the console uses too (apply files, output). */
export type { BatchingView, FilterView, RetryView };

/** Plain objects for `--json` and tables: the CLI's vocabulary, not the wire's. */
export interface SourceView {
  id: string;
  name: string;
  writeKeyPrefix: string;
  createTime: string | null;
  /** Web origins whose browsers may send (empty: any). */
  allowedOrigins: string[];
}

export interface DestinationView {
  id: string;
  name: string;
  sourceIds: string[];
  urls: string[];
  headers: Record<string, string>;
  sharedSecretSet: boolean;
  signing: SigningName;
  enabled: boolean;
  /** Delivery order: per-user keeps each user's calls in the order accepted. */
  ordering: OrderingName;
  /** Consent categories a call must grant; empty: no consent requirement. */
  consentCategories: string[];
  /** What a call without a consent object gets (with consent categories). */
  consentMissing: ConsentMissingName;
  /** Which calls it gets; null: every call. */
  filter: FilterView | null;
  /** JSONata rendering the body; "": the default body. */
  mapping: string;
  method: MethodName;
  /** Its own retry schedule; null: the server's. */
  retry: RetryView | null;
  /** Calls sent together as JSON arrays; null: one call per request. */
  batching: BatchingView | null;
  deliveryMode: DeliveryModeName;
  createTime: string | null;
  updateTime: string | null;
  /** Lifecycle (README "Destination lifecycle"). */
  rateLimitPerSecond?: number | null;
  maxInFlight?: number | null;
  disabledReason?: string;
  disabledTime?: string | null;
  previousSecretExpireTime?: string | null;
  /** With standard-webhooks-ed25519: the whpk_ keys receivers verify with, current first. */
  signingPublicKeys: string[];
}

export interface OperatorWebhookView {
  id: string;
  name: string;
  url: string;
  secretSet: boolean;
  /** Empty: every type. */
  eventTypes: string[];
  enabled: boolean;
  /** null: the default (0.5). */
  failingBelow: number | null;
  /** `15m`; null: the default. */
  behindAfter: string | null;
  createTime: string | null;
  updateTime: string | null;
}

export interface DeadLetterView {
  sequence: bigint;
  messageId: string;
  destinationId: string;
  sourceId: string;
  attempts: number;
  reason: string;
  outcomes: { url: string; status: number; error: string; detail: string }[];
  firstAttemptTime: string | null;
  deadTime: string | null;
  body: string;
}

export function iso(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

export function sourceView(s: Source): SourceView {
  return {
    id: s.id,
    name: s.name,
    writeKeyPrefix: s.writeKeyPrefix,
    createTime: iso(s.createTime),
    allowedOrigins: [...s.allowedOrigins],
  };
}

export function destinationView(d: Destination): DestinationView {
  return {
    id: d.id,
    name: d.name,
    sourceIds: [...d.sourceIds],
    urls: [...d.urls],
    headers: { ...d.headers },
    sharedSecretSet: d.sharedSecretSet,
    signing: SIGNING.name(d.signing),
    enabled: d.enabled ?? false,
    ordering: ORDERING.name(d.ordering),
    consentCategories: [...d.consentCategories],
    consentMissing: CONSENT_MISSING.name(d.consentMissing),
    filter: filterView(d.filter),
    mapping: d.mapping,
    method: methodOf(d.method) ?? "POST",
    retry: retryView(d.retry),
    batching: batchingView(d.batching),
    deliveryMode: DELIVERY_MODE.name(d.deliveryMode),
    createTime: iso(d.createTime),
    updateTime: iso(d.updateTime),
    rateLimitPerSecond: d.rateLimitPerSecond ?? null,
    maxInFlight: d.maxInFlight ?? null,
    disabledReason: d.disabledReason,
    disabledTime: iso(d.disabledTime),
    previousSecretExpireTime: iso(d.previousSecretExpireTime),
    signingPublicKeys: [...d.signingPublicKeys],
  };
}

export function operatorWebhookView(w: OperatorWebhook): OperatorWebhookView {
  return {
    id: w.id,
    name: w.name,
    url: w.url,
    secretSet: w.secretSet,
    eventTypes: [...w.eventTypes],
    enabled: w.enabled ?? false,
    failingBelow: w.failingBelow ?? null,
    behindAfter: w.behindAfter ? formatDuration(durationMs(w.behindAfter)) : null,
    createTime: iso(w.createTime),
    updateTime: iso(w.updateTime),
  };
}

export function deadLetterView(d: DeadLetter): DeadLetterView {
  return {
    sequence: d.sequence,
    messageId: d.messageId,
    destinationId: d.destinationId,
    sourceId: d.sourceId,
    attempts: d.attempts,
    reason: d.reason,
    outcomes: d.outcomes.map((o) => ({ url: o.url, status: o.status, error: o.error, detail: o.detail })),
    firstAttemptTime: iso(d.firstAttemptTime),
    deadTime: iso(d.deadTime),
    body: d.body,
  };
}

/** `https://a/x → 503 is retried`, `https://b/y → timeout after 5000 ms`: the detail says it all. */
export function outcomeText(o: DeadLetterView["outcomes"][number]): string {
  const fallback = o.status ? `HTTP ${o.status}` : o.error;
  return `${o.url} → ${o.detail || fallback || "?"}`;
}

/** The CLI's words for the fields of an update mask. */
const FIELD_WORDS: Record<string, string> = {
  name: "name",
  source_ids: "sources",
  urls: "urls",
  headers: "headers",
  shared_secret: "shared secret",
  signing: "signing",
  ordering: "ordering",
  consent_categories: "consent categories",
  consent_missing: "consent missing",
};

/**
 * What an update did, in words: `name, urls changed; now disabled`. The enabled state is read
 * from the destination the server returned, so the line says what is true now.
 */
export function updateSummary(paths: readonly string[], d: { enabled: boolean }): string {
  const changed = paths.filter((p) => p !== "enabled").map((p) => FIELD_WORDS[p] ?? p);
  const parts: string[] = [];
  if (changed.length > 0) parts.push(`${changed.join(", ")} changed`);
  if (paths.includes("enabled")) parts.push(d.enabled ? "now enabled" : "now disabled");
  return parts.join("; ");
}
