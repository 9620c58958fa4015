import type { Logger } from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { EventPublisher } from "../calls/publish.js";
import type { SourceQuota } from "../calls/quota.js";
import type { IngestMetrics } from "../metrics.js";
import type { Stores } from "../stores.js";
import { DEFAULT_SYNC_LIMITS } from "./sync-env.js";
import { SyncLimiter, type SyncLimits } from "./sync-limiter.js";
import { syncService } from "./sync-service.js";
import { sweepSyncTemp } from "./sync-temp.js";

/**
 * SyncAudience and SyncComputedTrait under the process's sync limits (SYNC_*): sweeps what an
 * earlier run left in the temporary folder, exposes the limiter's figures, returns the handlers.
 */
export async function startSync(
  limits: SyncLimits | undefined,
  deps: {
    nc: NatsConnection;
    stores: Stores;
    publisher: EventPublisher;
    quota: SourceQuota;
    metrics: IngestMetrics;
    log: Logger;
  },
): Promise<ReturnType<typeof syncService>> {
  const { nc, stores, publisher, quota, metrics, log } = deps;
  const limiter = new SyncLimiter(limits ?? DEFAULT_SYNC_LIMITS);
  await sweepSyncTemp(limiter.limits.tmpDir, log);
  metrics.watchSyncs(limiter);
  return syncService({
    store: stores.config,
    limiter,
    nc,
    log,
    memberships: stores.memberships,
    index: stores.index,
    // Each identify call counts toward its source's pending bytes as it is stored, and the sync
    // stops (RESOURCE_EXHAUSTED, membership unchanged) once the source is over that quota: one
    // sync cannot store past it, whatever the size of its audience.
    publish: async (c) => {
      quota.checkPending(c.sourceId);
      quota.stored(c.sourceId, await publisher.publish(c), 1);
    },
    quota,
    maxMembershipBytes: quota.maxMembershipBytes,
  });
}
