import type { GenService } from "@bufbuild/protobuf/codegenv2";
import type { StoredCall } from "@hookpost/contract";
import {
  acceptedBatchCalls,
  acceptedCall,
  type CallType,
  type ContractCall,
  fromProtoCall,
  type ProtoCall,
  protoBatchViolations,
  protoCallViolations,
} from "@hookpost/contract";
import type { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import type { ConfigStore, DeletionStore, Logger, UserSourceIndex } from "@hookpost/core";
import { type CallContext, grpcTraceContext, rawHandler, type ServiceImpl } from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { AdminAuth } from "../auth.js";
import { authenticateSource } from "../auth.js";
import { deleteUser } from "../deletion/delete-user.js";
import { throwIfInvalid } from "../invalid.js";
import type { CallIntake } from "./intake.js";
import type { EventPublisher } from "./publish.js";

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
  /** MAX_BATCH_CALLS: calls one Batch may carry. */
  maxBatchCalls: number;
  /** Deletion requests, for erasure and GetDeletion. */
  deletions: DeletionStore;
  /** Told when a deletion request is recorded (the erasure worker looks sooner). */
  onDeletionRequested?: () => void;
}

/**
 * IngestService: authenticate (write key), validate (all-or-nothing), stamp, persist on
 * JetStream, and only then answer with the message id(s). The sync RPCs, with their limits,
 * are in ../sync/sync-service.ts.
 */
export function ingestService(deps: IngestDeps): ServiceImpl<IngestMethods> {
  const publish = async (c: StoredCall) => {
    await deps.publisher.publish(c);
  };
  const store = (sourceId: string, calls: ContractCall[], ctx: CallContext) =>
    deps.intake.store(sourceId, calls, grpcTraceContext(ctx.metadata));

  // The contract reads the request bytes on its fast path (packages/contract/src/proto-wire.ts); what it
  // does not take is decoded by protobuf-es and checked by the full rules, which refuse it.
  // Either way: decoded (or refused as garbage), then authenticated, then validated.
  const one = async (
    type: CallType,
    req: { bytes: Uint8Array; decode(): ProtoCall["value"] },
    ctx: CallContext,
  ): Promise<{ messageId: string } | Uint8Array> => {
    let call = acceptedCall(type, req.bytes);
    const decoded = call === undefined ? ({ case: type, value: req.decode() } as ProtoCall) : undefined;
    const source = authenticateSource(deps.store, ctx.metadata);
    if (decoded !== undefined) {
      throwIfInvalid(protoCallViolations(decoded, req.bytes));
      call = fromProtoCall(decoded);
    }
    const ids = await store(source.id, [call!], ctx);
    return encodeIds(ids) ?? { messageId: ids[0]! };
  };

  return {
    identify: rawHandler((req, ctx) => one("identify", req, ctx)),
    track: rawHandler((req, ctx) => one("track", req, ctx)),
    page: rawHandler((req, ctx) => one("page", req, ctx)),
    screen: rawHandler((req, ctx) => one("screen", req, ctx)),
    group: rawHandler((req, ctx) => one("group", req, ctx)),
    alias: rawHandler((req, ctx) => one("alias", req, ctx)),

    batch: rawHandler(async (req, ctx) => {
      let calls = acceptedBatchCalls(req.bytes, deps.maxBatchCalls);
      const decoded = calls === undefined ? req.decode() : undefined;
      const source = authenticateSource(deps.store, ctx.metadata);
      if (decoded !== undefined) {
        throwIfInvalid(protoBatchViolations(decoded, req.bytes, deps.maxBatchCalls));
        calls = decoded.calls.map((bc) => fromProtoCall(bc.call as ProtoCall));
      }
      const messageIds = await store(source.id, calls!, ctx);
      return encodeIds(messageIds) ?? { messageIds };
    }),

    delete: async (req, ctx) => {
      deps.adminAuth.check(ctx.metadata);
      const r = await deleteUser(
        {
          nc: deps.nc,
          config: deps.store,
          log: deps.log,
          index: deps.index,
          deletions: deps.deletions,
          ...(deps.onDeletionRequested ? { onRequested: deps.onDeletionRequested } : {}),
          publish,
        },
        req.userId,
      );
      deps.log.info({ requestId: r.requestId, sources: r.sourceIds }, "deletion request stored");
      return r;
    },
  };
}

/**
 * The encoding of a response whose field 1 holds these message ids: BatchResponse
 * (`repeated string message_ids = 1`) and, with one id, every call response (`string
 * message_id = 1`), written directly. Message ids are ASCII of at most 100 characters (the
 * contract's rule; generated ones are UUIDs), so each is a tag byte, a length byte and its
 * characters; undefined otherwise (then protobuf-es encodes it). protobuf-es's reflective
 * encoding cost ~0.6 µs per call.
 */
export function encodeIds(ids: readonly string[]): Uint8Array | undefined {
  const joined = ids.join("");
  // As many UTF-8 bytes as UTF-16 units: all ASCII.
  const text = Buffer.from(joined, "utf8");
  if (text.length !== joined.length || ids.some((id) => id.length > 127)) return undefined;
  const out = Buffer.allocUnsafe(text.length + 2 * ids.length);
  let at = 0;
  let from = 0;
  for (const id of ids) {
    out[at++] = 0x0a;
    out[at++] = id.length;
    at += text.copy(out, at, from, from + id.length);
    from += id.length;
  }
  return out;
}
