import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ADMIN_PAGE_MAX_BYTES,
  ADMIN_PAGES,
  type FieldViolation,
  pageSize,
  pageSizeViolation,
} from "@hookpost/contract";
import { ActorKind, AuditOutcome, type AuditRecordSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { AuditEntry, AuditLog } from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { requiredIdViolations } from "./ids.js";
import { beforeSequence } from "./sequence-token.js";
import type { AdminHandlers } from "./sources.js";

export interface AuditRecordDeps {
  auditLog: Pick<AuditLog, "page">;
}

/**
 * ListAuditRecords: the audit log, newest first. There is deliberately no RPC that changes or
 * removes a record (and the stream itself denies deletes): records leave only by age.
 */
export function auditRecordHandlers(deps: AuditRecordDeps) {
  return {
    listAuditRecords: async (req) => {
      const violations: FieldViolation[] =
        req.resourceId === "" ? [] : requiredIdViolations(req.resourceId, "resource_id");
      const size = pageSize(req.pageSize, ADMIN_PAGES.auditRecords);
      if (size === undefined) violations.push(pageSizeViolation(ADMIN_PAGES.auditRecords));
      const before = beforeSequence(req.pageToken, violations);
      throwIfInvalid(violations);
      const page = await deps.auditLog.page({
        pageSize: size ?? ADMIN_PAGES.auditRecords.default,
        ...(before === undefined ? {} : { beforeSequence: before }),
        ...(req.resourceId ? { resourceId: req.resourceId } : {}),
        maxBytes: ADMIN_PAGE_MAX_BYTES,
      });
      return {
        records: page.entries.map(auditRecordToProto),
        nextPageToken: page.nextBefore === undefined ? "" : String(page.nextBefore),
      };
    },
  } satisfies AdminHandlers;
}

const ACTOR_KINDS: Record<string, ActorKind> = {
  admin: ActorKind.ADMIN_TOKEN,
  portal_link: ActorKind.PORTAL_LINK,
};

const json = (v: unknown) => (v === undefined ? "" : JSON.stringify(v));

function auditRecordToProto(e: AuditEntry): MessageInitShape<typeof AuditRecordSchema> {
  const { request, outcome } = e;
  return {
    id: request.auditId,
    sequence: BigInt(e.sequence),
    time: timestampFromDate(new Date(request.time)),
    actorKind: ACTOR_KINDS[request.actor.kind] ?? ActorKind.UNSPECIFIED,
    actorId: request.actor.id,
    action: request.action,
    resourceType: request.resourceType,
    resourceId: outcome?.resourceId || request.resourceId,
    requestJson: json(request.request),
    outcome:
      outcome === undefined
        ? AuditOutcome.UNKNOWN
        : outcome.ok
          ? AuditOutcome.SUCCEEDED
          : AuditOutcome.FAILED,
    error: outcome?.error ?? "",
    revision: BigInt(outcome?.revision ?? 0),
    changes: (outcome?.changes ?? []).map((c) => ({
      resourceType: c.resourceType,
      resourceId: c.resourceId,
      beforeJson: json(c.before),
      afterJson: json(c.after),
      changedFields: c.changedFields,
    })),
    ...(outcome ? { outcomeTime: timestampFromDate(new Date(outcome.time)) } : {}),
    resultJson: json(outcome?.result),
  };
}
