import { Code, HookpostError } from "@hookpost/contract";
import type {
  AttemptReader,
  AttemptSearch,
  AuditLog,
  CallContext,
  DeadLetters,
  DeletionStore,
  HealthAggregate,
  PortalLinkStore,
  ServiceImpl,
} from "@hookpost/core";
import { ConflictError, DomainError } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import type { AdminAuth } from "../auth.js";
import { attemptSearchHandlers } from "./attempt-search.js";
import { attemptHandlers } from "./attempts.js";
import { auditRecordHandlers } from "./audit-records.js";
import { AuditShare } from "./audit-share.js";
import { audited } from "./audited.js";
import { Callers, rememberCaller } from "./callers.js";
import { deadLetterHandlers } from "./dead-letters.js";
import { deletionHandlers } from "./deletions.js";
import { destinationHandlers } from "./destinations.js";
import { healthHandlers } from "./health.js";
import { operatorWebhookHandlers } from "./operator-webhooks.js";
import { portalLinkHandlers } from "./portal-links.js";
import { inPortalScope, Scope } from "./portal-scope.js";
import { PortalWriteRate } from "./portal-write-rate.js";
import { reencryptSecretsHandler } from "./reencrypt-secrets.js";
import { rotateSecretHandler } from "./rotate-secret.js";
import { type AdminDeps, type AdminMethods, sourceHandlers } from "./sources.js";
import { testCallHandler } from "./test-call.js";

export interface AdminServiceDeps extends AdminDeps {
  adminAuth: AdminAuth;
  /** Whether NATS is reachable: changes fail fast with UNAVAILABLE while it is not. */
  natsConnected: () => boolean;
  /** The DEAD stream, for ListDeadLetters / ReplayDeadLetters. */
  deadLetters: DeadLetters;
  /** The attempt log, for ListAttempts / GetMessage. */
  attempts: AttemptReader;
  /** The attempt log's search index, for SearchAttempts / GetAttemptLogInfo. */
  search: AttemptSearch;
  /** Delivery figures folded from the attempt log, for ListDestinationHealth. */
  health: HealthAggregate;
  /** Consumer lookups (backlog) for ListDestinationHealth. */
  jsm: JetStreamManager;
  /** Where every write is recorded (audited.ts), and what ListAuditRecords reads. */
  auditLog: Pick<AuditLog, "append" | "page" | "usage">;
  /** SOURCE_MAX_AUDIT_BYTES: what one source's portal links may take of the audit log; absent: no limit. */
  auditShareBytes?: number | undefined;
  /** Waits between attempts to store an audit outcome (tests shorten them). */
  auditOutcomeRetryMs?: readonly number[];
  /** An audit outcome could not be stored (a metric). */
  onAuditOutcomeLost?: () => void;
  /** Deletion requests, for GetDeletion. */
  deletions: DeletionStore;
  /** Portal links: their RPCs, and every call made with one (callers.ts, portal-scope.ts). */
  portalLinks: PortalLinkStore;
  /** CONSOLE_URL: where users reach the console (portal link URLs start with it). */
  consoleUrl?: string | undefined;
  /** Writes per portal link (default PORTAL_LINK_WRITE_RATE). */
  portalWriteRate?: PortalWriteRate;
}

function unreachable(what: string): HookpostError {
  return new HookpostError(Code.UNAVAILABLE, `NATS (where configuration is stored) is unreachable: ${what}`);
}

/** Errors of the nats client (timeouts, no responders, lost connection) carry a string code. */
function isNatsError(err: unknown): boolean {
  return err instanceof Error && typeof (err as { code?: unknown }).code === "string";
}

/** Reads (a dry run changes nothing); every other method is a write, and is audited (so is any write added later). */
const READ = /^(get|list|search|dryRun)[A-Z]/;

/** The AdminService methods, group by group (each group in its own file). */
const HANDLER_GROUPS = [
  deadLetterHandlers,
  sourceHandlers,
  destinationHandlers,
  rotateSecretHandler,
  attemptHandlers,
  attemptSearchHandlers,
  healthHandlers,
  auditRecordHandlers,
  reencryptSecretsHandler,
  deletionHandlers,
  testCallHandler,
  portalLinkHandlers,
  operatorWebhookHandlers,
];

/**
 * AdminService: every RPC first identifies its caller, the admin token or a portal link
 * (callers.ts); a portal link's calls pass its scope table (portal-scope.ts), which refuses
 * anything beyond its source. Every write is recorded in the audit log with who made it (audited.ts).
 */
export function adminService(deps: AdminServiceDeps): ServiceImpl<AdminMethods> {
  const handlers: Record<string, (req: unknown, ctx: CallContext) => Promise<unknown>> = Object.fromEntries(
    HANDLER_GROUPS.flatMap((group) => Object.entries(group(deps))),
  );
  const auditShare = new AuditShare(deps.auditLog, deps.auditShareBytes);
  const audit = {
    onCharged: (sourceId: string, bytes: number) => auditShare.charged(sourceId, bytes),
    auditLog: deps.auditLog,
    log: deps.log,
    ...(deps.now ? { now: deps.now } : {}),
    ...(deps.auditOutcomeRetryMs ? { outcomeRetryMs: deps.auditOutcomeRetryMs } : {}),
    ...(deps.onAuditOutcomeLost ? { onOutcomeLost: deps.onAuditOutcomeLost } : {}),
  };
  const callers = new Callers({
    adminAuth: deps.adminAuth,
    portalLinks: deps.portalLinks,
    store: deps.store,
    ...(deps.now ? { now: deps.now } : {}),
  });
  const portalWrites = deps.portalWriteRate ?? new PortalWriteRate();
  const guarded: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(handlers)) {
    const action = name.charAt(0).toUpperCase() + name.slice(1);
    const writes = !READ.test(name);
    const answer = async (req: unknown, ctx: CallContext) => {
      try {
        return await fn(req, ctx);
      } catch (err) {
        if (err instanceof ConflictError) throw new HookpostError(Code.ABORTED, `${err.message}: retry`);
        if (err instanceof HookpostError || err instanceof DomainError || !isNatsError(err)) throw err;
        deps.log.warn({ method: name, err: (err as Error).message }, "configuration write failed");
        throw unreachable("the change may or may not have been saved; check, then retry");
      }
    };
    guarded[name] = async (req: unknown, ctx: CallContext) => {
      const caller = await callers.identify(ctx.metadata);
      rememberCaller(ctx, caller);
      // A portal link's call runs within its source's world, or is refused (PERMISSION_DENIED).
      const run =
        caller.kind === "admin"
          ? () => answer(req, ctx)
          : () => inPortalScope(name, writes, req, new Scope(caller, deps.store), (r) => answer(r, ctx));
      // Reads are served from memory or the streams, and leave no record.
      if (!writes) return run();
      // Changes need the configuration bucket (and the audit log).
      if (!deps.natsConnected()) throw unreachable("nothing was changed");
      // A portal link's refused writes are recorded too (who tried what), within its rate.
      if (caller.kind === "portal_link") {
        portalWrites.take(caller.link.id);
        await auditShare.check(caller.source.id);
        return audited(audit, { action, actor: caller.actor, req, ctx, chargeTo: caller.source.id }, run);
      }
      return audited(audit, { action, actor: caller.actor, req, ctx }, run);
    };
  }
  return guarded as ServiceImpl<AdminMethods>;
}
