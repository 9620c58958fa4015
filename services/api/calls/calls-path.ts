import { DEFAULT_MAX_BATCH_CALLS } from "@hookpost/contract";
import type { Logger } from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { AdminAuth } from "../auth.js";
import type { IngestConfig } from "../config.js";
import type { IngestMetrics } from "../metrics.js";
import type { Stores } from "../stores.js";
import { ingestService } from "./ingest-service.js";
import { CallIntake } from "./intake.js";
import type { EventPublisher } from "./publish.js";
import { SourceQuota, type SourceQuotaSettings } from "./quota.js";

/** The calls path: per-source quotas, the one intake both transports store through, IngestService. */
export interface CallsPath {
  readonly quota: SourceQuota;
  /** Stores validated calls; the HTTP API uses it too. */
  readonly intake: CallIntake;
  /** MAX_BATCH_CALLS, on both transports. */
  readonly maxBatchCalls: number;
  /** IngestService's call and Delete handlers (the sync ones are the sync part's). */
  readonly service: ReturnType<typeof ingestService>;
  close(): void;
}

export async function startCallsPath(
  config: Pick<IngestConfig, "maxBatchCalls"> & { quota: SourceQuotaSettings },
  deps: {
    nc: NatsConnection;
    stores: Stores;
    publisher: EventPublisher;
    adminAuth: AdminAuth;
    metrics: IngestMetrics;
    log: Logger;
    /** Told when a deletion request is recorded. */
    onDeletionRequested?: () => void;
  },
): Promise<CallsPath> {
  const { nc, stores, publisher, adminAuth, metrics, log } = deps;
  const quota = new SourceQuota(config.quota, {
    jsm: stores.jsm,
    store: stores.config,
    log,
    onRefused: (limit) => metrics.quotaRefused(limit),
  });
  await quota.start();
  const intake = new CallIntake(publisher, stores.index, { quota });
  const maxBatchCalls = config.maxBatchCalls ?? DEFAULT_MAX_BATCH_CALLS;
  const service = ingestService({
    store: stores.config,
    publisher,
    adminAuth,
    nc,
    log,
    index: stores.index,
    intake,
    maxBatchCalls,
    deletions: stores.deletions,
    ...(deps.onDeletionRequested ? { onDeletionRequested: deps.onDeletionRequested } : {}),
  });
  return { quota, intake, maxBatchCalls, service, close: () => quota.close() };
}
