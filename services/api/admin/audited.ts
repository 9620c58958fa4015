import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, HookpostError } from "@hookpost/contract";
import {
  AUDIT_STREAM,
  type AuditActor,
  type AuditLog,
  type AuditOutcomeRecord,
  type AuditRequestRecord,
  type CallContext,
  countIfFull,
  DomainError,
  type Logger,
  redact,
  redactFieldKeys,
} from "@hookpost/core";
import { openAuditChanges } from "./audit-changes.js";

export interface AuditDeps {
  auditLog: Pick<AuditLog, "append">;
  log: Logger;
  now?: () => Date;
  /** Waits between attempts to store an outcome (default: 0.1, 0.5, 2 s). */
  outcomeRetryMs?: readonly number[];
  /** Called when an outcome could not be stored after every retry (a metric). */
  onOutcomeLost?: () => void;
  /** Told of each record stored with a `chargeTo` and the bytes charged (audit-share.ts). */
  onCharged?: (sourceId: string, bytes: number) => void;
}

export interface AuditedCall {
  /** The RPC, e.g. "UpdateDestination". */
  action: string;
  actor: AuditActor;
  req: unknown;
  ctx: CallContext;
  /** The source whose share of the log the records take (a portal link's write). */
  chargeTo?: string;
}

const DEFAULT_RETRY_MS = [100, 500, 2_000];
const MAX_ID_CHARS = 128;
const MAX_ERROR_CHARS = 1_000;

/**
 * Runs one admin write under the audit log. Record first, then apply:
 * 1. the request record (who, what, when, the redacted request) is stored before the handler
 *    runs; if it cannot be stored the call is refused and nothing is changed, so no change is
 *    ever made without a record of it;
 * 2. the handler runs (and reports what it changed, before → after: audit-changes.ts);
 * 3. the outcome record (succeeded or the error, revision, changes) is stored, retried a few times.
 *    If it still cannot be stored the call answers as it would have (the change is made, and its
 *    answer may carry a write key or secret shown only once), the failure is logged and counted,
 *    and the audit log lists the call with outcome UNKNOWN: the record of who asked is there.
 */
export async function audited<T>(deps: AuditDeps, call: AuditedCall, run: () => Promise<T>): Promise<T> {
  const now = deps.now ?? (() => new Date());
  const auditId = randomBytes(10).toString("hex");
  const { resourceType, resourceId } = resourceOf(call.action, call.req);
  const request: AuditRequestRecord = {
    kind: "request",
    auditId,
    time: now().toISOString(),
    actor: call.actor,
    action: call.action,
    resourceType,
    resourceId,
    request: redact(call.req),
  };
  try {
    charged(deps, call, await deps.auditLog.append(request, call.chargeTo));
  } catch (err) {
    throw notRecorded(err);
  }
  const changes = openAuditChanges(call.ctx);
  const outcome = (fields: Pick<AuditOutcomeRecord, "ok" | "error" | "revision" | "result">) => ({
    kind: "outcome" as const,
    auditId,
    time: now().toISOString(),
    ...fields,
    resourceId: changes[0]?.resourceId ?? resourceId,
    changes,
  });
  let answer: T;
  try {
    answer = await run();
  } catch (err) {
    await storeOutcome(deps, call, outcome({ ok: false, error: errorText(err, auditId), revision: 0 }));
    throw err;
  }
  const { revision, result } = summary(answer);
  await storeOutcome(deps, call, outcome({ ok: true, revision, ...(result ? { result } : {}) }));
  return answer;
}

async function storeOutcome(deps: AuditDeps, call: AuditedCall, record: AuditOutcomeRecord): Promise<void> {
  const waits = deps.outcomeRetryMs ?? DEFAULT_RETRY_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      charged(deps, call, await deps.auditLog.append(record, call.chargeTo));
      return;
    } catch (err) {
      countIfFull(AUDIT_STREAM, err);
      if (attempt >= waits.length) {
        deps.onOutcomeLost?.();
        deps.log.error(
          { auditId: record.auditId, action: call.action, err: (err as Error).message },
          "the outcome of an admin write could not be added to the audit log: its record shows outcome unknown",
        );
        return;
      }
      await sleep(waits[attempt]);
    }
  }
}

/** `bytes`: what the append charged to the call's source (0 when it charges none). */
function charged(deps: AuditDeps, call: AuditedCall, bytes: number): void {
  if (call.chargeTo !== undefined) deps.onCharged?.(call.chargeTo, bytes);
}

function notRecorded(err: unknown): HookpostError {
  if (countIfFull(AUDIT_STREAM, err)) {
    return new HookpostError(
      Code.RESOURCE_EXHAUSTED,
      "the audit log is full (AUDIT_LOG_MAX_BYTES), so nothing was changed: raise AUDIT_LOG_MAX_BYTES or lower AUDIT_LOG_MAX_AGE, then retry",
    );
  }
  return new HookpostError(
    Code.UNAVAILABLE,
    `the audit log could not record this change, so nothing was changed (${(err as Error).message}): retry`,
  );
}

/** What the call is about, as the request names it (a create with a generated id names none). */
function resourceOf(action: string, req: unknown): { resourceType: string; resourceId: string } {
  const r = (req ?? {}) as {
    id?: unknown;
    destinationId?: unknown;
    sourceId?: unknown;
    destination?: unknown;
    source?: unknown;
    operatorWebhook?: unknown;
  };
  const text = (v: unknown) => (typeof v === "string" ? v.slice(0, MAX_ID_CHARS) : "");
  if (r.operatorWebhook !== undefined || /OperatorWebhook/.test(action)) {
    const w = r.operatorWebhook as { id?: unknown } | undefined;
    return { resourceType: "operator_webhook", resourceId: text(w?.id ?? r.id) };
  }
  const destination = r.destination as { id?: unknown } | undefined;
  if (r.destination !== undefined || /Destination|RotateSecret|DeadLetters/.test(action)) {
    return { resourceType: "destination", resourceId: text(destination?.id ?? r.destinationId ?? r.id) };
  }
  if (/Source|WriteKey/.test(action)) {
    const source = r.source as { id?: unknown } | undefined;
    return { resourceType: "source", resourceId: text(source?.id ?? r.id ?? r.sourceId) };
  }
  // A new link is about its source (the link id is made by the call); a revocation about the link.
  if (/PortalLink/.test(action)) {
    return r.sourceId !== undefined
      ? { resourceType: "source", resourceId: text(r.sourceId) }
      : { resourceType: "portal_link", resourceId: text(r.id) };
  }
  return { resourceType: "", resourceId: text(r.id ?? r.destinationId ?? r.sourceId) };
}

/** The revision of an answer, and its other scalar fields (redacted: a write key, a secret). */
function summary(answer: unknown): { revision: number; result?: Record<string, unknown> } {
  const a = (answer ?? {}) as Record<string, unknown>;
  const revision = typeof a.revision === "bigint" || typeof a.revision === "number" ? Number(a.revision) : 0;
  const scalars = Object.entries(a).filter(
    ([k, v]) => k !== "revision" && !k.startsWith("$") && v !== null && typeof v !== "object",
  );
  if (scalars.length === 0) return { revision };
  return { revision, result: redact(Object.fromEntries(scalars)) as Record<string, unknown> };
}

/**
 * The error as the caller saw it (malformed header names hidden: they may hold a value); an
 * unexpected one only by its id (its text may hold anything).
 */
function errorText(err: unknown, auditId: string): string {
  const text = (code: string, message: string) =>
    redactFieldKeys(`${code}: ${message}`).slice(0, MAX_ERROR_CHARS);
  if (err instanceof HookpostError) return text(Code[err.code] ?? String(err.code), err.message);
  if (err instanceof DomainError) return text(err.code, err.message);
  return `INTERNAL: unexpected error (logged by ingest with audit id ${auditId})`;
}
