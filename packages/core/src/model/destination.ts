import type { BatchingSettings, FilterSettings, Method, RetrySettings, Signing } from "@hookpost/contract";

export type { Signing };

/** A webhook destination as stored in the configuration bucket. */
export interface DestinationRecord {
  id: string;
  name: string;
  sourceIds: string[];
  /** 1..5 absolute http(s) URLs, tried in order. */
  urls: string[];
  /** At most 5 static headers. */
  headers: Record<string, string>;
  /** Absent when none is set. Never returned by the admin API. */
  sharedSecret?: string;
  /** After RotateSecret: the rotated-out secret, which keeps signing until previousSecretExpiresAt. */
  previousSecret?: string;
  /** ISO time; the previous secret signs only before it. */
  previousSecretExpiresAt?: string;
  signing: Signing;
  enabled: boolean;
  /** At most this many deliveries per second across all dispatcher replicas; absent: no limit. */
  rateLimitPerSecond?: number;
  /** At most this many requests in flight across all replicas; absent: DELIVERY_CONCURRENCY per replica. */
  maxInFlight?: number;
  /**
   * PER_USER: the calls of one user (userId, else anonymousId) reach it in the order accepted.
   * Absent: unordered (the default).
   */
  ordering?: "PER_USER";
  /**
   * Consent categories a call must grant (contract's consentDecision); absent: no consent
   * requirement. Never stored empty.
   */
  consentCategories?: string[];
  /** "FILTER": a call without a consent object is filtered. Absent: delivered (the default). */
  consentMissing?: "FILTER";
  /** Which calls it gets (docs/design/shaping.md); absent: every call. Never stored empty. */
  filter?: DestinationFilterRecord;
  /** A JSONata expression rendering the body from the default body; absent: the default body. */
  mapping?: string;
  /** Absent: POST. */
  method?: Exclude<Method, "POST">;
  /** Its own retry schedule within the server's bounds; absent: the server's. Never stored empty. */
  retry?: RetrySettings & { windowMs?: number; delaysMs?: number[] };
  /**
   * Calls sent together as one JSON-array request (docs/design/shaping.md section 7.1); absent: one
   * call per request. Stored `{}` when every part is the default.
   */
  batching?: BatchingSettings;
  /** "FAN_OUT": every URL gets every call (section 7.2). Absent: FAILOVER (the default). */
  deliveryMode?: "FAN_OUT";
  /**
   * Only on a FAN_OUT delivery target's view (`ConfigStore.destination("<id>~<i>")`): the
   * destination it belongs to and the URL it delivers to. Never stored.
   */
  target?: { destinationId: string; urlIndex: number };
  /** Set when Hookpost paused the destination (410 Gone, failing too long); cleared on enable. */
  disabledReason?: string;
  /** ISO time of that pause. */
  disabledAt?: string;
  createdAt: string;
  updatedAt: string;
}

/** A destination's filter as stored: only the parts that are set. */
export interface DestinationFilterRecord extends FilterSettings {
  types?: string[];
  events?: string[];
  expression?: string;
}

/**
 * The secrets that sign a request at `now`: the current one first, then the previous one while
 * its overlap lasts. Empty without a secret.
 */
export function signingSecrets(d: DestinationRecord, now: number = Date.now()): string[] {
  if (!d.sharedSecret) return [];
  const out = [d.sharedSecret];
  if (d.previousSecret && d.previousSecretExpiresAt && Date.parse(d.previousSecretExpiresAt) > now) {
    out.push(d.previousSecret);
  }
  return out;
}

/**
 * The delivery targets of a FAN_OUT destination (docs/design/shaping.md 7.2): one view per URL,
 * `id` the target id and `urls` that one URL. A target whose URL was removed since has no URL
 * (its deliveries become "not sent" attempts, then dead letters).
 */
export function targetView(d: DestinationRecord, id: string, urlIndex: number): DestinationRecord {
  const url = d.urls[urlIndex];
  return { ...d, id, urls: url === undefined ? [] : [url], target: { destinationId: d.id, urlIndex } };
}
