import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ADMIN_PAGE_MAX_BYTES,
  ADMIN_PAGES,
  Code,
  type FieldViolation,
  HookpostError,
  MAX_REPLAY_SEQUENCES,
  pageSize,
  pageSizeViolation,
} from "@hookpost/contract";
import type { DeadLetterSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { ConfigStore, DeadLetter, DeadLetters, Logger } from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { notFound, optionalIdViolations, requiredIdViolations, timeFilter } from "./ids.js";
import type { AdminHandlers } from "./sources.js";

export interface DeadLetterDeps {
  store: ConfigStore;
  deadLetters: DeadLetters;
  log: Logger;
}

/**
 * ListDeadLetters / ReplayDeadLetters over the DEAD stream (records written by the dispatcher).
 * Listing works for deleted destinations too (their records stay until DEAD_LETTER_MAX_AGE);
 * replaying needs the destination to exist, or the deliveries would land where nobody reads.
 */
export function deadLetterHandlers(deps: DeadLetterDeps) {
  return {
    listDeadLetters: async (req) => {
      const violations =
        req.destinationId === "" ? [] : requiredIdViolations(req.destinationId, "destination_id");
      if (req.sourceId !== "") violations.push(...requiredIdViolations(req.sourceId, "source_id"));
      const size = pageSize(req.pageSize, ADMIN_PAGES.deadLetters);
      if (size === undefined) violations.push(pageSizeViolation(ADMIN_PAGES.deadLetters));
      if (req.afterSequence > MAX_SEQUENCE) {
        violations.push({
          field: "after_sequence",
          description: `is not a sequence from a previous response (at most ${MAX_SEQUENCE})`,
        });
      }
      throwIfInvalid(violations);
      const { letters, nextAfter } = await deps.deadLetters.page(req.destinationId, {
        afterSequence: Number(req.afterSequence),
        ...(size === undefined ? {} : { pageSize: size }),
        ...(req.sourceId ? { sourceId: req.sourceId } : {}),
        maxBytes: ADMIN_PAGE_MAX_BYTES,
      });
      // Deleted destinations keep their records; an id with neither is a mistake worth saying.
      if (letters.length === 0 && req.destinationId !== "" && !deps.store.destination(req.destinationId)) {
        const any = await deps.deadLetters.list(req.destinationId, { pageSize: 1 });
        if (any.length === 0) throw notFound("destination", req.destinationId);
      }
      return { deadLetters: letters.map(toProto), nextAfterSequence: BigInt(nextAfter ?? 0) };
    },

    replayDeadLetters: async (req) => {
      const violations = [
        ...requiredIdViolations(req.destinationId, "destination_id"),
        ...optionalIdViolations(req.sourceId, "source_id"),
        ...sequenceViolations(req.sequences),
      ];
      const sinceMs = timeFilter(req.since, "since", violations);
      const untilMs = timeFilter(req.until, "until", violations);
      throwIfInvalid(violations);
      if (!deps.store.destination(req.destinationId)) throw notFound("destination", req.destinationId);
      if (sinceMs !== undefined && untilMs !== undefined && untilMs <= sinceMs) {
        throwIfInvalid([{ field: "until", description: "must be after since" }]);
      }
      const sequences = req.sequences.map(Number);
      // Every given sequence must be a record of this destination (and source, when given): a
      // typo is not a silent 0, and another source's call with the same message id is not replayed.
      const missing: number[] = [];
      for (const seq of new Set(sequences)) {
        const letter = await deps.deadLetters.get(req.destinationId, seq);
        if (!letter || (req.sourceId !== "" && letter.sourceId !== req.sourceId)) missing.push(seq);
      }
      if (missing.length > 0) {
        const of = req.sourceId === "" ? "" : ` from source "${req.sourceId}"`;
        const named = missing.slice(0, MAX_NAMED_MISSING).join(", ");
        const more =
          missing.length > MAX_NAMED_MISSING ? ` and ${missing.length - MAX_NAMED_MISSING} more` : "";
        throw new HookpostError(
          Code.NOT_FOUND,
          `no dead letter of destination "${req.destinationId}"${of} with sequence ${named}${more}`,
        );
      }
      const r = await deps.deadLetters.replay(
        req.destinationId,
        sequences.length > 0 ? sequences : undefined,
        {
          ...(sinceMs === undefined ? {} : { sinceMs }),
          ...(untilMs === undefined ? {} : { untilMs }),
          ...(req.sourceId === "" ? {} : { sourceId: req.sourceId }),
        },
      );
      deps.log.info(
        { destinationId: req.destinationId, sourceId: req.sourceId || undefined, replayed: r.replayed },
        "dead letters replayed",
      );
      return r;
    },
  } satisfies AdminHandlers;
}

/** The largest stream sequence read exactly (as a JavaScript number); NATS refuses 2^64 - 1 + 1. */
const MAX_SEQUENCE = BigInt(Number.MAX_SAFE_INTEGER);

/** Sequences a NOT_FOUND names (the rest are counted). */
const MAX_NAMED_MISSING = 20;

/**
 * The sequences of a replay: at most MAX_REPLAY_SEQUENCES (each is looked up before anything is
 * replayed), each one a stream sequence can be (1 to 2^53 - 1: read as a JavaScript number).
 */
function sequenceViolations(sequences: readonly bigint[]): FieldViolation[] {
  if (sequences.length > MAX_REPLAY_SEQUENCES) {
    return [
      {
        field: "sequences",
        description: `has ${sequences.length} sequences, at most ${MAX_REPLAY_SEQUENCES}: replay in parts, or by time range (since, until)`,
      },
    ];
  }
  return sequences.flatMap((s, i) =>
    s < 1n || s > MAX_SEQUENCE
      ? [
          {
            field: `sequences[${i}]`,
            description: `is not a dead-letter sequence (1 to ${MAX_SEQUENCE}): got ${s}`,
          },
        ]
      : [],
  );
}

function toProto(d: DeadLetter): MessageInitShape<typeof DeadLetterSchema> {
  return {
    sequence: BigInt(d.sequence),
    messageId: d.messageId,
    destinationId: d.destinationId,
    sourceId: d.sourceId,
    body: d.body,
    attempts: d.attempts,
    outcomes: d.outcomes.map((o) => ({ url: o.url, status: o.status, error: o.error, detail: o.detail })),
    reason: d.reason,
    firstAttemptTime: timestampFromDate(new Date(d.firstAttemptTime)),
    deadTime: timestampFromDate(new Date(d.deadTime)),
    bodyOmitted: d.bodyOmitted ?? false,
    ...(d.urlIndex === undefined ? {} : { urlIndex: d.urlIndex }),
  };
}
