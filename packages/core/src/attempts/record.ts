import { hash } from "node:crypto";

/**
 * The attempt log: what happened to every delivery, kept on its own JetStream stream (ATTEMPTS)
 * with its own limits. The dispatcher writes it (without waiting), the admin API reads it.
 * Its stream and subjects are in nats/topology.ts.
 */
import { splitTarget } from "../nats/topology.js";

export {
  ATTEMPT_SUBJECTS,
  ATTEMPTS_STREAM,
  attemptRecordSubject,
  attemptSubject,
  deadRecordSubject,
  healthSubject,
  routedRecordSubject,
  routedSubject,
} from "../nats/topology.js";

/** 64 bits of SHA-256, hex: collisions only widen a lookup (records carry the full id). */
export function messageHash(messageId: string): string {
  return hash("sha256", messageId, "hex").slice(0, 16);
}

/** Mirrors hookpost.v1.AttemptOutcome. */
export type OutcomeKind =
  | "success"
  | "redirect"
  | "client_error"
  | "server_error"
  | "timeout"
  | "connection"
  | "tls"
  | "ssrf"
  | "invalid_response"
  | "not_sent"
  | "filtered";

/** One HTTP attempt on one URL, or a refusal before any request. Times are ISO 8601. */
export interface AttemptRecord {
  kind: "attempt";
  messageId: string;
  destinationId: string;
  sourceId: string;
  url: string;
  attemptNumber: number;
  startTime: string;
  durationMs: number;
  outcome: OutcomeKind;
  status: number;
  reason: string;
  retryable: boolean;
  responseBody: string;
  /** The call's user (users/user-hash.ts), for erasure; absent in older records and deletion notices. */
  userHash?: string;
  /** The call's type and (track) event name (search facets); absent in records before issue 28. */
  callType?: string;
  event?: string;
  /**
   * Only in records written before the dispatcher left it to the routed record (the same bytes
   * go to every destination); AttemptReader.requestBodies joins it from there.
   */
  requestBody?: string;
  /** Set when the delivery will be tried again. */
  nextAttemptTime?: string;
  /**
   * When the delivery was first stored, on the records of an attempt made a second or more after
   * that (a retry, a call that waited on a paused destination or behind a PER_USER head): erasure
   * erases such a record with the call it belongs to, however late it was written
   * (erasure/user-of-record.ts). Absent otherwise, and in older records.
   */
  firstTime?: string;
  /** A FAN_OUT destination's URL this delivery goes to (its target, docs/design/shaping.md 7.2). */
  urlIndex?: number;
  /**
   * Set when this one message is also the call's routing record: a call delivered at the first,
   * direct attempt to its only destination (docs/design/attempt-log-messages.md). Its body is
   * then `requestBody`. Readers see both records (`logRecordsOf`).
   */
  routed?: RoutedFacts;
}

/** What a routing record says beyond an attempt record of the same call, when the two are one message. */
export interface RoutedFacts {
  receivedAt: string;
  time: string;
  destinations: string[];
}

/** The delivery became a dead letter (after attempts, or waiting on a paused destination). */
export interface DeadRecord {
  kind: "dead";
  messageId: string;
  destinationId: string;
  sourceId: string;
  deadSequence: number;
  reason: string;
  time: string;
  /** As on AttemptRecord. */
  userHash?: string;
  callType?: string;
  event?: string;
  /** As on AttemptRecord. */
  urlIndex?: number;
  /** When the delivery was first stored (the letter's `firstAttemptTime`), for erasure. */
  firstTime?: string;
}

/** The attempt log's record of a dead letter stored at `deadSequence` on DEAD. */
export function deadRecordOf(
  letter: {
    messageId: string;
    destinationId: string;
    sourceId: string;
    reason: string;
    deadTime: string;
    userHash?: string;
    callType?: string;
    event?: string;
    urlIndex?: number;
    firstAttemptTime?: string;
  },
  deadSequence: number,
): DeadRecord {
  const { messageId, destinationId, sourceId, reason, deadTime, userHash, callType, event, urlIndex } =
    letter;
  const r: DeadRecord = {
    kind: "dead",
    messageId,
    destinationId,
    sourceId,
    deadSequence,
    reason,
    time: deadTime,
  };
  if (userHash) r.userHash = userHash;
  if (callType) r.callType = callType;
  if (event !== undefined) r.event = event;
  if (urlIndex !== undefined) r.urlIndex = urlIndex;
  if (letter.firstAttemptTime) r.firstTime = letter.firstAttemptTime;
  return r;
}

/** What the router did with a call: which destinations it went to, or why none. */
export interface RoutedRecord {
  kind: "routed";
  messageId: string;
  sourceId: string;
  receivedAt: string;
  time: string;
  /** As on AttemptRecord. */
  userHash?: string;
  callType?: string;
  event?: string;
  destinations: string[];
  /** The call's integrations turned webhooks off: `destinations` were filtered, not sent to. */
  filtered: boolean;
  /**
   * Destinations of the source the call did not go to because it did not grant their consent
   * categories, each with the rule's reason (`consent: "Advertising" not granted`). Absent in
   * records written before consent per destination, and when none was filtered.
   */
  consentFiltered?: ConsentFiltered[];
  /** FAN_OUT destinations among `destinations`, with the number of URLs the call went to. */
  fanOut?: Record<string, number>;
  /** Absent when ATTEMPT_LOG_BODIES is off. */
  body?: string;
}

/** One destination a call was not sent to for consent, and why. */
export interface ConsentFiltered {
  destinationId: string;
  reason: string;
}

export type LogRecord = AttemptRecord | DeadRecord | RoutedRecord;

/**
 * The records one stored message holds: itself, or for an attempt that is also its call's
 * routing record, the routing record then the attempt (the same sequence), each as written apart.
 */
export function logRecordsOf(r: LogRecord): LogRecord[] {
  if (r.kind !== "attempt" || r.routed === undefined) return [r];
  const { routed, ...attempt }: AttemptRecord = r;
  const view: RoutedRecord = {
    kind: "routed",
    messageId: r.messageId,
    sourceId: r.sourceId,
    ...(r.userHash === undefined ? {} : { userHash: r.userHash }),
    ...(r.callType === undefined ? {} : { callType: r.callType }),
    ...(r.event === undefined ? {} : { event: r.event }),
    receivedAt: routed.receivedAt,
    time: routed.time,
    destinations: routed.destinations,
    filtered: false,
    ...(r.requestBody === undefined ? {} : { body: r.requestBody }),
  };
  return [view, attempt];
}

/** `logRecordsOf` of a stored message: each record with the message's sequence. */
export function storedRecordsOf(r: Stored): Stored[] {
  return logRecordsOf(r).map((x) => (x === r ? r : { ...x, sequence: r.sequence }));
}

/**
 * The one message of a call delivered at its only destination's first, direct attempt: the
 * attempt, with the routing record's facts and its body (last: the indexer leaves it unparsed).
 * Only for an attempt that sent the routed body itself (no `requestBody` of its own: a mapped
 * body keeps two messages, so that each body stays with its record).
 */
export function deliveredRecord(routed: RoutedRecord, attempt: AttemptRecord): AttemptRecord {
  return {
    ...attempt,
    routed: { receivedAt: routed.receivedAt, time: routed.time, destinations: routed.destinations },
    ...(routed.body === undefined ? {} : { requestBody: routed.body }),
  };
}

/**
 * `JSON.stringify(deliveredRecord(routed, attempt))`, the same text, without building the merged
 * record: the attempt's JSON with the routing fields and the body appended (half the time of a
 * spread and a stringify of its result, on every direct delivery). An attempt that already
 * carries either key (never written so) takes the general way.
 */
export function deliveredJson(routed: RoutedRecord, attempt: AttemptRecord): string {
  if ("routed" in attempt || "requestBody" in attempt)
    return JSON.stringify(deliveredRecord(routed, attempt));
  const head = JSON.stringify(attempt);
  const r = JSON.stringify({
    receivedAt: routed.receivedAt,
    time: routed.time,
    destinations: routed.destinations,
  });
  const body = routed.body === undefined ? "" : `,"requestBody":${JSON.stringify(routed.body)}`;
  return `${head.slice(0, -1)},"routed":${r}${body}}`;
}

/**
 * Records name the destination, never a FAN_OUT target (`<id>~<i>`): a record written for a
 * target says `destinationId` and `urlIndex` instead, so every reader works per destination.
 */
export function ofDestination<T extends { destinationId: string; urlIndex?: number }>(r: T): T {
  const t = splitTarget(r.destinationId);
  return t === undefined ? r : { ...r, destinationId: t.destinationId, urlIndex: t.urlIndex };
}

/** A record with its ATTEMPTS stream sequence. */
export type Stored<T extends LogRecord = LogRecord> = T & { sequence: number };

export const RESPONSE_EXCERPT_BYTES = 4096;

/** The outcome kind of a status (0: no response) and error kind from the sender. */
export function outcomeKind(status: number, error: string): OutcomeKind {
  if (error === "invalid_response" || error === "not_sent" || error === "filtered") return error;
  if (status >= 200 && status < 300) return "success";
  if (status >= 300 && status < 400) return "redirect";
  if (status >= 400 && status < 500) return "client_error";
  if (status >= 500) return "server_error";
  if (error === "timeout" || error === "tls" || error === "ssrf") return error;
  return "connection";
}

/** The metrics label: 2xx/3xx/4xx/5xx for answers, the error kind otherwise. */
export function statusClass(status: number, error: string): string {
  if (status >= 100 && status < 600) return `${Math.floor(status / 100)}xx`;
  if (error === "timeout" || error === "tls" || error === "ssrf") return error;
  return error === "http" ? "invalid" : "connection";
}
