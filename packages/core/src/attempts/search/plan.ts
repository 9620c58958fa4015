import { loggedEvent } from "../../dead-letters/delivery-headers.js";
import { userHash } from "../../users/user-hash.js";
import type { LogRecord } from "../record.js";
import {
  eventHash,
  type Facets,
  type Indexed,
  messageKey,
  type StatusCode,
  typeCode,
  userKeyOfHash,
} from "./entries.js";

/** What a search asks for; every field is optional and they all apply. */
export interface SearchFilter {
  destinationId?: string;
  sourceId?: string;
  /** Any of these (empty or unset: every status). */
  statuses?: readonly StatusCode[];
  /** HTTP statuses from httpMin to httpMax, inclusive. */
  httpMin?: number;
  httpMax?: number;
  callType?: string;
  /** A track call's event name, exactly. */
  event?: string;
  /** The call's userId (matched through its hash). */
  userId?: string;
  messageId?: string;
  /** Records at or after (ms). */
  sinceMs?: number;
  /** Records before (ms). */
  untilMs?: number;
  /** Only records of these kinds (ListAttempts: attempts only). */
  kinds?: readonly LogRecord["kind"][];
}

/** A filter compiled once per query: what the index can narrow by, and the exact check of a record. */
export class Plan {
  readonly filter: SearchFilter;
  /** eventHash() of the event asked for. */
  readonly event: string | undefined;
  /** The key the index looks up: the message's when given, else the user's. */
  readonly key: string | undefined;
  readonly #statuses: ReadonlySet<StatusCode> | undefined;
  readonly #type: number | undefined;
  readonly #userHash: string | undefined;
  readonly #event: string | undefined;

  constructor(filter: SearchFilter) {
    this.filter = filter;
    this.#statuses = filter.statuses && filter.statuses.length > 0 ? new Set(filter.statuses) : undefined;
    this.#type = filter.callType === undefined ? undefined : typeCode(filter.callType);
    this.#userHash = filter.userId === undefined ? undefined : userHash({ userId: filter.userId });
    this.#event = filter.event === undefined ? undefined : loggedEvent(filter.event);
    this.event = filter.event === undefined ? undefined : eventHash(filter.event);
    this.key =
      filter.messageId !== undefined
        ? messageKey(filter.messageId)
        : this.#userHash !== undefined
          ? userKeyOfHash(this.#userHash)
          : undefined;
  }

  /** Whether an entry with these facets may match (the index's tuples, the in-memory tail). */
  facets(f: Facets): boolean {
    const q = this.filter;
    return (
      (q.destinationId === undefined || f.destinationId === q.destinationId) &&
      (q.sourceId === undefined || f.sourceId === q.sourceId) &&
      (this.#statuses === undefined || this.#statuses.has(f.status)) &&
      (q.httpMin === undefined || f.http >= q.httpMin) &&
      (q.httpMax === undefined || f.http <= q.httpMax) &&
      (this.#type === undefined || f.callType === this.#type)
    );
  }

  /** Whether the filter bounds time at all. */
  get timed(): boolean {
    return this.filter.sinceMs !== undefined || this.filter.untilMs !== undefined;
  }

  /** Whether a record's time is in range (the index prunes segments by their time span). */
  timeOverlaps(tMin: number, tMax: number): boolean {
    const q = this.filter;
    return (q.sinceMs === undefined || tMax >= q.sinceMs) && (q.untilMs === undefined || tMin < q.untilMs);
  }

  /** The exact check: the indexes of the record's entries that match (the index only narrows). */
  matches(r: LogRecord, ix: Indexed): number[] {
    const q = this.filter;
    if (q.kinds && !q.kinds.includes(r.kind)) return [];
    if (q.sinceMs !== undefined && ix.time < q.sinceMs) return [];
    if (q.untilMs !== undefined && ix.time >= q.untilMs) return [];
    if (q.messageId !== undefined && r.messageId !== q.messageId) return [];
    if (this.#userHash !== undefined && r.userHash !== this.#userHash) return [];
    if (this.#event !== undefined && (r.callType !== "track" || r.event !== this.#event)) return [];
    const out: number[] = [];
    ix.entries.forEach((e, i) => {
      if (this.facets(e)) out.push(i);
    });
    return out;
  }
}
