import type { GenService } from "@bufbuild/protobuf/codegenv2";
import type { NatsConnection } from "nats";
import type { IngestService } from "../../../gen/hookpost/v1/ingest_pb.js";
import type { ConfigStore } from "../../../lib/config/config-store.js";
import { type CallContext, Code, HookpostError, type ServiceImpl } from "../../../lib/grpc/mod.js";
import type { Logger } from "../../../lib/log/logger.js";
import type { MembershipStore } from "../../../lib/membership/membership-store.js";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import { grpcTraceContext } from "../../../lib/tracing/mod.js";
import type { UserSourceIndex } from "../../../lib/users/user-source-index.js";
import type { AdminAuth } from "../auth.js";
import { authenticateSource } from "../auth.js";
import { deleteUser } from "../deletion/delete-user.js";
import { throwIfInvalid } from "../invalid.js";
import { syncAudience, syncComputedTrait } from "../sync/mod.js";
import type { Call } from "./call.js";
import { PUBLISH_CONCURRENCY } from "./limits.js";
import type { EventPublisher } from "./publish.js";
import { toStoredCall } from "./to-stored-call.js";
import { callSizeProblem, validateBatch, validateCall } from "./validate.js";

type IngestMethods = typeof IngestService extends GenService<infer S> ? S : never;

export interface IngestDeps {
  store: ConfigStore;
  publisher: EventPublisher;
  adminAuth: AdminAuth;
  nc: NatsConnection;
  log: Logger;
  /** Which sources have seen each user id (for deletion requests). */
  index: UserSourceIndex;
  /** Stored audience and computed-trait memberships. */
  memberships: MembershipStore;
  /** The server clock (tests may fix it). */
  now?: () => Date;
}

/**
 * IngestService: authenticate (write key), validate (all-or-nothing), stamp, persist on
 * JetStream, and only then answer with the message id(s).
 */
export function ingestService(deps: IngestDeps): ServiceImpl<IngestMethods> {
  const now = deps.now ?? (() => new Date());
  const publish = (c: StoredCall) => deps.publisher.publish(c);
  const syncDeps = { nc: deps.nc, log: deps.log, memberships: deps.memberships, index: deps.index, publish };

  /** Records the user ids of stored calls; free for pairs already known (in-memory cache). */
  const remember = (calls: StoredCall[]): Promise<unknown> => {
    const pending: Promise<void>[] = [];
    for (const c of calls) {
      if (c.userId) pending.push(deps.index.remember(c.userId, c.sourceId));
      // An alias ties the previous id to the source as well: a deletion of it must reach it.
      if (c.previousId) pending.push(deps.index.remember(c.previousId, c.sourceId));
    }
    return Promise.all(pending);
  };

  const one = async (call: Call, ctx: CallContext): Promise<{ messageId: string }> => {
    const source = authenticateSource(deps.store, ctx.metadata);
    const tooLarge = callSizeProblem(call);
    if (tooLarge) throw new HookpostError(Code.INVALID_ARGUMENT, tooLarge);
    throwIfInvalid(validateCall(call));
    const stored = toStoredCall(call, { sourceId: source.id, receivedAt: now() });
    await Promise.all([deps.publisher.publish(stored, grpcTraceContext(ctx.metadata)), remember([stored])]);
    return { messageId: stored.messageId };
  };

  return {
    identify: (value, ctx) => one({ case: "identify", value }, ctx),
    track: (value, ctx) => one({ case: "track", value }, ctx),
    page: (value, ctx) => one({ case: "page", value }, ctx),
    screen: (value, ctx) => one({ case: "screen", value }, ctx),
    group: (value, ctx) => one({ case: "group", value }, ctx),
    alias: (value, ctx) => one({ case: "alias", value }, ctx),

    batch: async (req, ctx) => {
      const source = authenticateSource(deps.store, ctx.metadata);
      throwIfInvalid(validateBatch(req));
      const stamp = { sourceId: source.id, receivedAt: now() };
      const stored = req.calls.map((bc) => toStoredCall(bc.call as Call, stamp));
      await Promise.all([
        deps.publisher.publishAll(stored, PUBLISH_CONCURRENCY, grpcTraceContext(ctx.metadata)),
        remember(stored),
      ]);
      return { messageIds: stored.map((s) => s.messageId) };
    },

    delete: async (req, ctx) => {
      deps.adminAuth.check(ctx.metadata);
      const r = await deleteUser(
        { nc: deps.nc, config: deps.store, log: deps.log, index: deps.index, publish },
        req.userId,
      );
      deps.log.info({ requestId: r.requestId, sources: r.sourceIds }, "deletion request stored");
      return r;
    },
    syncAudience: async (reqs, ctx) => {
      const source = authenticateSource(deps.store, ctx.metadata);
      const r = await syncAudience(syncDeps, source.id, reqs, { signal: ctx.signal });
      return { members: BigInt(r.members), joined: BigInt(r.joined), left: BigInt(r.left) };
    },
    syncComputedTrait: async (reqs, ctx) => {
      const source = authenticateSource(deps.store, ctx.metadata);
      const r = await syncComputedTrait(syncDeps, source.id, reqs, { signal: ctx.signal });
      return { users: BigInt(r.users), changed: BigInt(r.changed), left: BigInt(r.left) };
    },
  };
}
