/**
 * The audit log's records, stored as JSON on the AUDIT stream. Each admin call leaves two, joined
 * by its audit id: a request record stored before the call may change anything, and an outcome
 * record stored once it answered. Every value in them is already redacted (redact.ts).
 */

/**
 * Who made a call. `admin`: the admin token, by its fingerprint (never the token). `portal_link`:
 * a portal link, by its link id (never its token).
 */
export interface AuditActor {
  kind: "admin" | "portal_link";
  /** Identifies the credential without revealing it (e.g. 8 hex digits of an HMAC of the token). */
  id: string;
}

/** What one call changed in one resource: the redacted records before and after. */
export interface AuditChange {
  resourceType: "source" | "destination" | "portal_link" | "operator_webhook";
  resourceId: string;
  /** Absent: the resource did not exist (created). */
  before?: unknown;
  /** Absent: the resource was deleted. */
  after?: unknown;
  /** Top-level fields whose value changed, secrets included (their values are not shown). */
  changedFields: string[];
}

export interface AuditRequestRecord {
  kind: "request";
  auditId: string;
  /** ISO time, before anything was changed. */
  time: string;
  actor: AuditActor;
  /** The RPC, e.g. "UpdateDestination". */
  action: string;
  /** "source", "destination", "operator_webhook", or "" when the RPC is not known to be about one. */
  resourceType: string;
  /** From the request; "" when the request names none (a create with a generated id). */
  resourceId: string;
  /** The request, redacted. */
  request: unknown;
}

export interface AuditOutcomeRecord {
  kind: "outcome";
  auditId: string;
  time: string;
  ok: boolean;
  /** When not ok: the error's code name and message. */
  error?: string;
  /** The resource the call was about as it turned out (e.g. a generated id). */
  resourceId: string;
  /** The configuration revision the change created; 0 when none. */
  revision: number;
  changes: AuditChange[];
  /** Scalar fields of the answer other than the revision, redacted (e.g. `{ replayed: 3 }`). */
  result?: Record<string, unknown>;
}

export type AuditStoredRecord = AuditRequestRecord | AuditOutcomeRecord;

/** One call as listed: its request record with its outcome, when one was stored. */
export interface AuditEntry {
  /** Stream sequence of the request record. */
  sequence: number;
  request: AuditRequestRecord;
  outcome?: AuditOutcomeRecord;
}
