import type { GenService } from "@bufbuild/protobuf/codegenv2";
import type { NatsConnection } from "nats";
import {
  fromProtoCall,
  type ProtoCall,
  protoBatchViolations,
  protoCallViolations,
} from "../../../contract/mod.js";
import type { IngestService } from "../../../gen/hookpost/v1/ingest_pb.js";
import type { ConfigStore } from "../../../lib/config/config-store.js";
import { type CallContext, Code, HookpostError, type ServiceImpl } from "../../../lib/grpc/mod.js";
import type { Logger } from "../../../lib/log/logger.js";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import { grpcTraceContext } from "../../../lib/tracing/mod.js";
import type { UserSourceIndex } from "../../../lib/users/user-source-index.js";
import type { AdminAuth } from "../auth.js";
import { authenticateSource } from "../auth.js";
import { deleteUser } from "../deletion/delete-user.js";
import { throwIfInvalid } from "../invalid.js";
import type { CallIntake } from "./intake.js";
import type { EventPublisher } from "./publish.js";
import type { RawRequests } from "./raw-requests.js";

type IngestMethods = typeof IngestService extends GenService<infer S> ? S : never;

export interface IngestDeps {
  store: ConfigStore;
  publisher: EventPublisher;
  adminAuth: AdminAuth;
  nc: NatsConnection;
  log: Logger;
  /** Which sources have seen each user id (for deletion requests). */
  index: UserSourceIndex;
  /** Stores validated calls (shared with the HTTP API). */
  intake: CallIntake;
  /** The request bytes of each unary call, as they arrived (sizes, `__proto__` scan). */
  raw: RawRequests;
  /** MAX_BATCH_CALLS: calls one Batch may carry. */
  maxBatchCalls: number;
}

/**
 * IngestService: authenticate (write key), validate (all-or-nothing), stamp, persist on
 * JetStream, and only then answer with the message id(s). The sync RPCs, with their limits,
 * are in ../sync/sync-service.ts.
 */
export function ingestService(deps: IngestDeps): ServiceImpl<IngestMethods> {
  const publish = (c: StoredCall) => deps.publisher.publish(c);
  const rawBytes = (ctx: CallContext): Uint8Array => {
    const bytes = deps.raw.of(ctx.metadata);
    if (!bytes) throw new HookpostError(Code.INTERNAL, "the request bytes were not recorded");
    return bytes;
  };

  const one = async (call: ProtoCall, ctx: CallContext): Promise<{ messageId: string }> => {
    const source = authenticateSource(deps.store, ctx.metadata);
    throwIfInvalid(protoCallViolations(call, rawBytes(ctx)));
    const [messageId] = await deps.intake.store(
      source.id,
      [fromProtoCall(call)],
      grpcTraceContext(ctx.metadata),
    );
    return { messageId: messageId! };
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
      throwIfInvalid(protoBatchViolations(req, rawBytes(ctx), deps.maxBatchCalls));
      const calls = req.calls.map((bc) => fromProtoCall(bc.call as ProtoCall));
      return { messageIds: await deps.intake.store(source.id, calls, grpcTraceContext(ctx.metadata)) };
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
  };
}
