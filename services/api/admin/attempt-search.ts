import { createHash } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ADMIN_PAGE_MAX_BYTES,
  ADMIN_PAGES,
  answerBytes,
  type FieldViolation,
  pageSize,
  pageSizeViolation,
  searchFilterViolations,
} from "@hookpost/contract";
import { type LogEntrySchema, LogStatus } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  ATTEMPT_INDEX_STREAM,
  ATTEMPTS_STREAM,
  type AttemptRecord,
  type AttemptSearch,
  type ConfigStore,
  type Cursor,
  type SearchFilter,
  type SearchHit,
  type SearchStatus,
  STATUS_CODES,
  type Stored,
  searchStatusOf,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { throwIfInvalid } from "../invalid.js";
import { attemptToProto } from "./attempts.js";
import { logFilterViolations, notFound, timeFilter } from "./ids.js";
import type { AdminHandlers } from "./sources.js";

export interface AttemptSearchDeps {
  store: ConfigStore;
  search: AttemptSearch;
  jsm: JetStreamManager;
}

const STATUS_OF_PROTO: Record<number, SearchStatus> = {
  [LogStatus.DELIVERED]: "delivered",
  [LogStatus.FAILED]: "failed",
  [LogStatus.FILTERED]: "filtered",
  [LogStatus.DEAD_LETTERED]: "dead_lettered",
};
const PROTO_OF_STATUS: Record<SearchStatus, LogStatus> = {
  delivered: LogStatus.DELIVERED,
  failed: LogStatus.FAILED,
  filtered: LogStatus.FILTERED,
  dead_lettered: LogStatus.DEAD_LETTERED,
};

/** A page ends with what it found once reading took this long; its token continues (see AttemptSearch). */
const PAGE_DEADLINE_MS = 800;

/** A page token: where the page ended, and a hash of the filters it belongs to. */
const TOKEN = /^v1\.(\d{1,16})\.(-?\d{1,10})\.([0-9a-f]{12})$/;

function filterHash(filter: SearchFilter): string {
  return createHash("sha256").update(JSON.stringify(filter)).digest("hex").slice(0, 12);
}

function encodeToken(c: Cursor, filter: SearchFilter): string {
  return Buffer.from(`v1.${c.seq}.${c.k}.${filterHash(filter)}`).toString("base64url");
}

function decodeToken(token: string, filter: SearchFilter): Cursor | FieldViolation {
  const m = /^[A-Za-z0-9_-]{1,200}$/.test(token)
    ? TOKEN.exec(Buffer.from(token, "base64url").toString())
    : null;
  if (!m) return { field: "page_token", description: "is not a token from a previous response" };
  if (m[3] !== filterHash(filter)) {
    return { field: "page_token", description: "belongs to a search with other filters" };
  }
  return { seq: Number(m[1]), k: Number(m[2]) };
}

/** Bytes a search entry adds to an answer (request bodies are not part of it). */
function hitBytes(h: SearchHit): number {
  const r = h.record;
  return answerBytes(
    r.messageId,
    r.sourceId,
    h.entry?.destinationId ?? "",
    h.entry?.reason ?? "",
    r.event ?? "",
    r.kind === "attempt" ? r.url : "",
    r.kind === "attempt" ? r.responseBody : "",
  );
}

function entryToProto(h: SearchHit): MessageInitShape<typeof LogEntrySchema> {
  const r = h.record;
  const e = h.entry!;
  return {
    sequence: BigInt(r.sequence),
    time: timestampFromDate(new Date(h.time)),
    status: PROTO_OF_STATUS[searchStatusOf(e.status)],
    messageId: r.messageId,
    sourceId: r.sourceId,
    destinationId: e.destinationId,
    httpStatus: e.http,
    callType: r.callType ?? "",
    event: r.event ?? "",
    reason: e.reason,
    ...(r.kind === "attempt"
      ? { attempt: { ...attemptToProto(r as Stored<AttemptRecord>), requestBody: "" } }
      : {}),
    ...(r.kind === "dead" ? { deadLetterSequence: BigInt(r.deadSequence) } : {}),
  };
}

/** SearchAttempts and GetAttemptLogInfo (docs/design/attempt-search.md). */
export function attemptSearchHandlers(deps: AttemptSearchDeps) {
  return {
    searchAttempts: async (req) => {
      const violations = logFilterViolations(req);
      const sinceMs = timeFilter(req.since, "since", violations);
      const untilMs = timeFilter(req.until, "until", violations);
      violations.push(
        ...searchFilterViolations({
          statuses: req.statuses,
          httpStatus: req.httpStatus,
          httpStatusClass: req.httpStatusClass,
          sinceMs,
          untilMs,
          callType: req.callType,
          event: req.event,
          userId: req.userId,
          messageId: req.messageId,
        }),
      );
      const size = pageSize(req.pageSize, ADMIN_PAGES.attempts);
      if (size === undefined) violations.push(pageSizeViolation(ADMIN_PAGES.attempts));
      throwIfInvalid(violations);
      const statuses = [...new Set(req.statuses)].flatMap((s) => STATUS_CODES[STATUS_OF_PROTO[s]!]);
      const cls = req.httpStatusClass;
      const filter: SearchFilter = {
        ...(req.destinationId ? { destinationId: req.destinationId } : {}),
        ...(req.sourceId ? { sourceId: req.sourceId } : {}),
        ...(statuses.length > 0 ? { statuses: statuses.sort() } : {}),
        ...(req.httpStatus ? { httpMin: req.httpStatus, httpMax: req.httpStatus } : {}),
        ...(cls ? { httpMin: cls * 100, httpMax: cls * 100 + 99 } : {}),
        ...(req.callType ? { callType: req.callType } : {}),
        ...(req.event ? { event: req.event } : {}),
        ...(req.userId ? { userId: req.userId } : {}),
        ...(req.messageId ? { messageId: req.messageId } : {}),
        ...(sinceMs !== undefined ? { sinceMs } : {}),
        ...(untilMs !== undefined ? { untilMs } : {}),
      };
      const after = req.pageToken === "" ? undefined : decodeToken(req.pageToken, filter);
      if (after && "field" in after) throwIfInvalid([after]);
      const page = await deps.search.search(filter, {
        pageSize: size ?? ADMIN_PAGES.attempts.default,
        maxBytes: ADMIN_PAGE_MAX_BYTES,
        bytes: hitBytes,
        deadlineMs: PAGE_DEADLINE_MS,
        ...(after ? { after: after as Cursor } : {}),
      });
      // A typo is never an empty, reassuring answer.
      if (page.hits.length === 0 && !after) {
        if (req.destinationId && !deps.store.destination(req.destinationId)) {
          throw notFound("destination", req.destinationId);
        }
        if (req.sourceId && !deps.store.source(req.sourceId)) {
          throw notFound("source", req.sourceId);
        }
      }
      return {
        entries: page.hits.map(entryToProto),
        nextPageToken: page.next ? encodeToken(page.next, filter) : "",
        unindexedRecords: BigInt(page.unindexed),
      };
    },

    getAttemptLogInfo: async () => {
      const [log, index] = await Promise.all([
        deps.jsm.streams.info(ATTEMPTS_STREAM),
        deps.jsm.streams.info(ATTEMPT_INDEX_STREAM),
      ]);
      const empty = log.state.messages === 0;
      return {
        maxAge: durationFromMs(log.config.max_age / 1e6),
        maxBytes: BigInt(log.config.max_bytes),
        bytes: BigInt(log.state.bytes),
        records: BigInt(log.state.messages),
        ...(empty
          ? {}
          : {
              oldestTime: timestampFromDate(new Date(log.state.first_ts)),
              newestTime: timestampFromDate(new Date(log.state.last_ts)),
            }),
        indexBytes: BigInt(index.state.bytes),
        indexMaxBytes: BigInt(index.config.max_bytes),
        unindexedRecords: BigInt(Math.max(0, log.state.last_seq - deps.search.index.followed)),
      };
    },
  } satisfies AdminHandlers;
}
