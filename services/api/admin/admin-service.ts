import { Code, HookpostError } from "@hookpost/contract";
import type {
  AttemptReader,
  CallContext,
  DeadLetters,
  DeletionStore,
  HealthAggregate,
  ServiceImpl,
} from "@hookpost/core";
import { ConflictError, DomainError } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import type { AdminAuth } from "../auth.js";
import { attemptHandlers } from "./attempts.js";
import { deadLetterHandlers } from "./dead-letters.js";
import { deletionHandlers } from "./deletions.js";
import { destinationHandlers } from "./destinations.js";
import { healthHandlers } from "./health.js";
import { rotateSecretHandler } from "./rotate-secret.js";
import { type AdminDeps, type AdminMethods, sourceHandlers } from "./sources.js";

export interface AdminServiceDeps extends AdminDeps {
  adminAuth: AdminAuth;
  /** Whether NATS is reachable: changes fail fast with UNAVAILABLE while it is not. */
  natsConnected: () => boolean;
  /** The DEAD stream, for ListDeadLetters / ReplayDeadLetters. */
  deadLetters: DeadLetters;
  /** The attempt log, for ListAttempts / GetMessage. */
  attempts: AttemptReader;
  /** Delivery figures folded from the attempt log, for ListDestinationHealth. */
  health: HealthAggregate;
  /** Consumer lookups (backlog) for ListDestinationHealth. */
  jsm: JetStreamManager;
  /** Deletion requests, for GetDeletion. */
  deletions: DeletionStore;
}

function unreachable(what: string): HookpostError {
  return new HookpostError(Code.UNAVAILABLE, `NATS (where configuration is stored) is unreachable: ${what}`);
}

/** Errors of the nats client (timeouts, no responders, lost connection) carry a string code. */
function isNatsError(err: unknown): boolean {
  return err instanceof Error && typeof (err as { code?: unknown }).code === "string";
}

/** AdminService: every RPC first checks `authorization: Bearer <ADMIN_TOKEN>`. */
export function adminService(deps: AdminServiceDeps): ServiceImpl<AdminMethods> {
  const handlers: Record<string, (req: unknown, ctx: CallContext) => Promise<unknown>> = {
    ...deadLetterHandlers(deps),
    ...sourceHandlers(deps),
    ...destinationHandlers(deps),
    ...rotateSecretHandler(deps),
    ...attemptHandlers(deps),
    ...healthHandlers(deps),
    ...deletionHandlers(deps),
  } as Record<string, (req: unknown, ctx: CallContext) => Promise<unknown>>;
  const guarded: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(handlers)) {
    const changes = /^(create|update|delete|rotate|replay)/.test(name);
    guarded[name] = async (req: unknown, ctx: CallContext) => {
      deps.adminAuth.check(ctx.metadata);
      // Reads are served from memory; changes need the configuration bucket.
      if (changes && !deps.natsConnected()) throw unreachable("nothing was changed");
      try {
        return await fn(req, ctx);
      } catch (err) {
        if (err instanceof ConflictError) throw new HookpostError(Code.ABORTED, `${err.message}: retry`);
        if (err instanceof HookpostError || err instanceof DomainError || !isNatsError(err)) throw err;
        deps.log.warn({ method: name, err: (err as Error).message }, "configuration write failed");
        throw unreachable("the change may or may not have been saved; check, then retry");
      }
    };
  }
  return guarded as ServiceImpl<AdminMethods>;
}
