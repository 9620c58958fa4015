import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DeadLetterSchema } from "../../../gen/hookpost/v1/admin_pb.js";
import type { ConfigStore } from "../../../lib/config/config-store.js";
import type { DeadLetter, DeadLetters } from "../../../lib/dead-letters/mod.js";
import { Code, HookpostError, type ServiceImpl } from "../../../lib/grpc/mod.js";
import type { Logger } from "../../../lib/log/logger.js";
import { throwIfInvalid } from "../invalid.js";
import { requiredIdViolations } from "./ids.js";
import type { AdminMethods } from "./sources.js";

export interface DeadLetterDeps {
  store: ConfigStore;
  deadLetters: DeadLetters;
  log: Logger;
}

const MAX_PAGE = 1000;

/**
 * ListDeadLetters / ReplayDeadLetters over the DEAD stream (records written by the dispatcher).
 * Listing works for deleted destinations too (their records stay until DEAD_LETTER_MAX_AGE);
 * replaying needs the destination to exist, or the deliveries would land where nobody reads.
 */
export function deadLetterHandlers(
  deps: DeadLetterDeps,
): Pick<ServiceImpl<AdminMethods>, "listDeadLetters" | "replayDeadLetters"> {
  return {
    listDeadLetters: async (req) => {
      const violations =
        req.destinationId === "" ? [] : requiredIdViolations(req.destinationId, "destination_id");
      if (req.pageSize < 0 || req.pageSize > MAX_PAGE) {
        violations.push({
          field: "page_size",
          description: `must be between 0 (default 100) and ${MAX_PAGE}`,
        });
      }
      throwIfInvalid(violations);
      const letters = await deps.deadLetters.list(req.destinationId, {
        afterSequence: Number(req.afterSequence),
        pageSize: req.pageSize,
      });
      // Deleted destinations keep their records; an id with neither is a mistake worth saying.
      if (letters.length === 0 && req.destinationId !== "" && !deps.store.destination(req.destinationId)) {
        const any = await deps.deadLetters.list(req.destinationId, { pageSize: 1 });
        if (any.length === 0) throw destinationNotFound(req.destinationId);
      }
      return { deadLetters: letters.map(toProto) };
    },

    replayDeadLetters: async (req) => {
      throwIfInvalid(requiredIdViolations(req.destinationId, "destination_id"));
      if (!deps.store.destination(req.destinationId)) throw destinationNotFound(req.destinationId);
      const sinceMs = req.since ? timestampDate(req.since).getTime() : undefined;
      const untilMs = req.until ? timestampDate(req.until).getTime() : undefined;
      if (sinceMs !== undefined && untilMs !== undefined && untilMs <= sinceMs) {
        throwIfInvalid([{ field: "until", description: "must be after since" }]);
      }
      const sequences = req.sequences.map(Number);
      // Every given sequence must be a record of this destination: a typo is not a silent 0.
      const missing: number[] = [];
      for (const seq of new Set(sequences)) {
        if (!(await deps.deadLetters.get(req.destinationId, seq))) missing.push(seq);
      }
      if (missing.length > 0) {
        throw new HookpostError(
          Code.NOT_FOUND,
          `no dead letter of destination "${req.destinationId}" with sequence ${missing.join(", ")}`,
        );
      }
      const r = await deps.deadLetters.replay(
        req.destinationId,
        sequences.length > 0 ? sequences : undefined,
        {
          ...(sinceMs === undefined ? {} : { sinceMs }),
          ...(untilMs === undefined ? {} : { untilMs }),
        },
      );
      deps.log.info({ destinationId: req.destinationId, replayed: r.replayed }, "dead letters replayed");
      return r;
    },
  };
}

function destinationNotFound(id: string): HookpostError {
  return new HookpostError(Code.NOT_FOUND, `destination "${id}" does not exist`);
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
  };
}
