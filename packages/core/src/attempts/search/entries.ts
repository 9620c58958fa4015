import { hash } from "node:crypto";
import { EVENT_TYPES } from "@hookpost/contract";
import { loggedEvent } from "../../dead-letters/delivery-headers.js";
import { userHash } from "../../users/user-hash.js";
import type { LogRecord } from "../record.js";

/**
 * What the search index knows of attempt-log records (docs/design/attempt-search.md section 2):
 * each record yields entries, each with facets (destination, source, status, HTTP status, call
 * type), plus the record's event-name hash and its keys (message, user). Every path (indexer,
 * in-memory tail, check of a fetched record) derives them here, so they never disagree.
 */

/** An entry's status as the index stores it: which record made it, and what came of it. */
export const STATUS = {
  delivered: 0,
  failed: 1,
  filteredAtAttempt: 2,
  filteredAtRouting: 3,
  deadLettered: 4,
} as const;
export type StatusCode = (typeof STATUS)[keyof typeof STATUS];

/** The statuses a search names (the API's LogStatus), and the codes each covers. */
export type SearchStatus = "delivered" | "failed" | "filtered" | "dead_lettered";
export const STATUS_CODES: Record<SearchStatus, readonly StatusCode[]> = {
  delivered: [STATUS.delivered],
  failed: [STATUS.failed],
  filtered: [STATUS.filteredAtAttempt, STATUS.filteredAtRouting],
  dead_lettered: [STATUS.deadLettered],
};
export function searchStatusOf(code: StatusCode): SearchStatus {
  if (code === STATUS.delivered) return "delivered";
  if (code === STATUS.failed) return "failed";
  if (code === STATUS.deadLettered) return "dead_lettered";
  return "filtered";
}

export interface Facets {
  destinationId: string;
  sourceId: string;
  status: StatusCode;
  /** HTTP status of an attempt; 0 without an answer and for other records. */
  http: number;
  /** typeCode() of the call type; 0 when the record does not say (older records). */
  callType: number;
}

export interface LogEntry extends Facets {
  /** Why: the attempt's or dead letter's reason, or the filter's. */
  reason: string;
}

export interface Indexed {
  /** The record's time (ms): an attempt's start, a dead letter's or a routing decision's time. */
  time: number;
  entries: LogEntry[];
  /** eventHash() of a track call's event name. */
  event?: string;
  /** keyOf() values: the message's, and the user's when the record has entries. */
  keys: string[];
}

/** The filter reason of a destination that the call's integrations turned off. */
export const INTEGRATIONS_FILTERED = "integrations: webhooks turned off";

export function typeCode(type: string | undefined): number {
  return type === undefined ? 0 : (EVENT_TYPES as readonly string[]).indexOf(type) + 1;
}
export function typeName(code: number): string {
  return EVENT_TYPES[code - 1] ?? "";
}

/** Event hashes of recent names (a log has few distinct event names; hashing is most of indexing's CPU). */
const eventHashes = new Map<string, string>();
const EVENT_HASHES_KEPT = 10_000;

/** 64 bits of SHA-256 of the event name as records keep it. */
export function eventHash(event: string): string {
  let h = eventHashes.get(event);
  if (h === undefined) {
    h = hash("sha256", loggedEvent(event), "hex").slice(0, 16);
    if (eventHashes.size >= EVENT_HASHES_KEPT) eventHashes.clear();
    eventHashes.set(event, h);
  }
  return h;
}

/** murmur3's 32-bit mix over UTF-16 code units, with its finalizer. */
function mix32(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x5bd1e995);
    h ^= h >>> 15;
  }
  h ^= s.length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A message's key: 48 bits of a fast hash of its id (every record is keyed: SHA-256 here was
 * most of the indexer's CPU). Collisions only widen a lookup: records carry the full id.
 */
export const messageKey = (messageId: string) =>
  mix32(messageId, 0x9747b28c).toString(16).padStart(8, "0") +
  mix32(messageId, 0x3c6ef372).toString(16).padStart(8, "0").slice(0, 4);
/** A user's key: the first 48 bits of the user hash erasure uses (SHA-256 of `u:<userId>`). */
export const userKeyOfHash = (hash: string) => hash.slice(0, 12);
export const userKeyOf = (userId: string) => userKeyOfHash(userHash({ userId }));

/** The time of a record (ms). */
export function recordTime(r: LogRecord): number {
  return Date.parse(r.kind === "attempt" ? r.startTime : r.time);
}

export function indexedOf(r: LogRecord | undefined): Indexed | undefined {
  if (typeof r !== "object" || r === null) return undefined;
  const callType = typeCode(r.callType);
  const base = { sourceId: r.sourceId, callType };
  const entries: LogEntry[] = [];
  if (r.kind === "attempt") {
    const status =
      r.outcome === "success"
        ? STATUS.delivered
        : r.outcome === "filtered"
          ? STATUS.filteredAtAttempt
          : STATUS.failed;
    entries.push({ ...base, destinationId: r.destinationId, status, http: r.status || 0, reason: r.reason });
  } else if (r.kind === "dead") {
    entries.push({
      ...base,
      destinationId: r.destinationId,
      status: STATUS.deadLettered,
      http: 0,
      reason: r.reason,
    });
  } else if (r.kind === "routed") {
    const seen = new Set<string>();
    const filtered = (destinationId: string, reason: string) => {
      if (seen.has(destinationId)) return;
      seen.add(destinationId);
      entries.push({ ...base, destinationId, status: STATUS.filteredAtRouting, http: 0, reason });
    };
    if (r.filtered) for (const d of r.destinations ?? []) filtered(d, INTEGRATIONS_FILTERED);
    for (const c of r.consentFiltered ?? []) filtered(c.destinationId, c.reason);
  } else {
    return undefined;
  }
  const time = recordTime(r);
  if (!Number.isFinite(time) || typeof r.messageId !== "string") return undefined;
  const keys = [messageKey(r.messageId)];
  if (r.userHash && entries.length > 0) keys.push(userKeyOfHash(r.userHash));
  return {
    time,
    entries,
    ...(r.callType === "track" && r.event !== undefined ? { event: eventHash(r.event) } : {}),
    keys,
  };
}

/** A key as two numbers: its first 16 bits (parts and buckets are taken from them) and the next 32. */
export function splitKey(key: string): { hi: number; lo: number } {
  return { hi: Number.parseInt(key.slice(0, 4), 16), lo: Number.parseInt(key.slice(4, 12), 16) };
}
