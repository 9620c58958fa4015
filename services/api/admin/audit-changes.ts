import {
  type AuditChange,
  type CallContext,
  changedFields,
  type DestinationRecord,
  type OperatorWebhookRecord,
  redact,
  type SourceRecord,
} from "@hookpost/core";

/**
 * What the handlers of one admin call tell the audit log: each resource they changed, before and
 * after. Keyed by the call's context, which the audit wrapper (audited.ts) opens before the
 * handler runs and reads once it answered; a handler called without one (tests) records nothing.
 */
const changes = new WeakMap<CallContext, AuditChange[]>();

export function openAuditChanges(ctx: CallContext): AuditChange[] {
  const list: AuditChange[] = [];
  changes.set(ctx, list);
  return list;
}

type Resource =
  | { type: "source"; before?: SourceRecord | undefined; after?: SourceRecord | undefined }
  | { type: "destination"; before?: DestinationRecord | undefined; after?: DestinationRecord | undefined }
  | { type: "portal_link"; before?: object | undefined; after?: object | undefined }
  | {
      type: "operator_webhook";
      before?: OperatorWebhookRecord | undefined;
      after?: OperatorWebhookRecord | undefined;
    };

/** Records that the call changed one resource (redacted here: secrets never reach the log). */
export function auditChange(ctx: CallContext, id: string, r: Resource): void {
  changes.get(ctx)?.push({
    resourceType: r.type,
    resourceId: id,
    ...(r.before === undefined ? {} : { before: redact(r.before) }),
    ...(r.after === undefined ? {} : { after: redact(r.after) }),
    changedFields: changedFields(r.before, r.after),
  });
}
