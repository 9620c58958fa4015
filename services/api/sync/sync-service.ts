import type { GenService } from "@bufbuild/protobuf/codegenv2";
import type { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import type { CallContext, ConfigStore, ServiceImpl } from "@hookpost/core";
import { authenticateSource } from "../auth.js";
import type { SourceQuota } from "../calls/quota.js";
import type { SyncDeps } from "./deps.js";
import { syncAudience } from "./sync-audience.js";
import { syncComputedTrait } from "./sync-computed-trait.js";
import type { SyncLimiter } from "./sync-limiter.js";

type IngestMethods = typeof IngestService extends GenService<infer S> ? S : never;

/**
 * The SyncAudience and SyncComputedTrait handlers of IngestService, under the per-process
 * limits of `limiter` (admission, memory, idle streams) and with its run size and folder.
 * The source is authenticated before a slot is taken.
 */
export function syncService(
  deps: Omit<SyncDeps, "tmpDir" | "runBytes"> & {
    store: ConfigStore;
    limiter: SyncLimiter;
    /** Per-source quota: a sync starts only while its source is under it (one request of its rate). */
    quota?: Pick<SourceQuota, "admit">;
  },
): Pick<ServiceImpl<IngestMethods>, "syncAudience" | "syncComputedTrait"> {
  const { store, limiter, quota, ...rest } = deps;
  const syncDeps: SyncDeps = { ...rest, tmpDir: limiter.limits.tmpDir, runBytes: limiter.limits.runBytes };
  /** Authenticated, under the source's quota and the limiter, with the sync's dependencies. */
  const run = <R, T>(
    reqs: AsyncIterable<R>,
    ctx: CallContext,
    sync: (
      deps: SyncDeps,
      sourceId: string,
      reqs: AsyncIterable<R>,
      o: { signal: AbortSignal },
    ) => Promise<T>,
  ): Promise<T> => {
    const source = authenticateSource(store, ctx.metadata);
    quota?.admit(source.id, 1);
    return limiter.run(source.id, reqs, ctx.signal, (limited) =>
      sync(syncDeps, source.id, limited, { signal: ctx.signal }),
    );
  };
  return {
    syncAudience: async (reqs, ctx) => {
      const r = await run(reqs, ctx, syncAudience);
      return { members: BigInt(r.members), joined: BigInt(r.joined), left: BigInt(r.left) };
    },
    syncComputedTrait: async (reqs, ctx) => {
      const r = await run(reqs, ctx, syncComputedTrait);
      return { users: BigInt(r.users), changed: BigInt(r.changed), left: BigInt(r.left) };
    },
  };
}
