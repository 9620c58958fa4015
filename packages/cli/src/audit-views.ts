import { ActorKind, AuditOutcome, type AuditRecord } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { enumWord } from "./attempt-views.js";
import { iso } from "./views.js";

/** One change of an audit record: the redacted records before and after (null: absent). */
export interface AuditChangeView {
  resourceType: string;
  resourceId: string;
  before: unknown;
  after: unknown;
  changedFields: string[];
}

/** An audit record in the CLI's words, for `--json` and tables (JSON fields parsed). */
export interface AuditView {
  id: string;
  sequence: bigint;
  time: string | null;
  actor: { kind: string; id: string };
  action: string;
  resourceType: string;
  resourceId: string;
  outcome: string;
  error: string;
  revision: bigint;
  request: unknown;
  result: unknown;
  changes: AuditChangeView[];
  outcomeTime: string | null;
}

const parsed = (json: string): unknown => (json === "" ? null : JSON.parse(json));

export function auditView(r: AuditRecord): AuditView {
  return {
    id: r.id,
    sequence: r.sequence,
    time: iso(r.time),
    actor: { kind: enumWord(ActorKind, r.actorKind), id: r.actorId },
    action: r.action,
    resourceType: r.resourceType,
    resourceId: r.resourceId,
    outcome: enumWord(AuditOutcome, r.outcome),
    error: r.error,
    revision: r.revision,
    request: parsed(r.requestJson),
    result: parsed(r.resultJson),
    changes: r.changes.map((c) => ({
      resourceType: c.resourceType,
      resourceId: c.resourceId,
      before: parsed(c.beforeJson),
      after: parsed(c.afterJson),
      changedFields: c.changedFields,
    })),
    outcomeTime: iso(r.outcomeTime),
  };
}

/** "admin 1a2b3c4d": who, without the credential. */
export function actorText(a: AuditView["actor"]): string {
  return `${a.kind === "admin-token" ? "admin" : a.kind} ${a.id}`;
}

/**
 * What a call did, one line per resource: "created", "deleted", "changed urls, sharedSecret";
 * another resource than the call's own is named. A failed call shows its error.
 */
export function changesText(r: AuditView): string {
  if (r.outcome === "failed") return r.error;
  if (r.outcome === "unknown") return "(no outcome recorded: check the resource)";
  const lines = r.changes.map((c) => {
    const what =
      c.before === null
        ? "created"
        : c.after === null
          ? "deleted"
          : c.changedFields.length > 0
            ? `changed ${c.changedFields.join(", ")}`
            : "unchanged";
    return c.resourceId === r.resourceId ? what : `${c.resourceType} ${c.resourceId}: ${what}`;
  });
  if (lines.length === 0 && r.result && typeof r.result === "object") {
    lines.push(
      Object.entries(r.result)
        .map(([k, v]) => `${k}: ${String(v)}`)
        .join(", "),
    );
  }
  return lines.join("\n");
}
