import {
  AttemptIndex,
  AttemptReader,
  AttemptSearch,
  HealthAggregate,
  type Logger,
  liveGauge,
  type ServiceImpl,
} from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { Registry } from "prom-client";
import type { AdminAuth } from "../auth.js";
import type { Stores } from "../stores.js";
import { adminService } from "./admin-service.js";
import type { AdminMethods } from "./sources.js";

/**
 * AdminService (gRPC and, through the console handler, Connect) with what it reads: the
 * destination-health feed, and the attempt log's search index (built and followed here).
 */
export interface AdminPart {
  readonly service: ServiceImpl<AdminMethods>;
  close(): void;
}

export async function startAdmin(deps: {
  nc: NatsConnection;
  stores: Stores;
  adminAuth: AdminAuth;
  natsConnected: () => boolean;
  log: Logger;
  /** An admin write's audit outcome could not be stored (a metric). */
  onAuditOutcomeLost?: () => void;
  /** RETRY_WINDOW and RETRY_MAX_DELAY: what a destination's own retry schedule must stay within. */
  retryBounds?: { windowMs: number; maxDelayMs: number };
  /** Where the attempt index's lag is reported. */
  registry?: Registry;
  /** CONSOLE_URL: portal link URLs start with it. */
  consoleUrl?: string | undefined;
  /** SOURCE_MAX_AUDIT_BYTES: one source's portal links' share of the audit log. */
  auditShareBytes?: number | undefined;
}): Promise<AdminPart> {
  const { stores, log } = deps;
  const index = await AttemptIndex.open(deps.nc, { logger: log });
  if (deps.registry) {
    liveGauge(
      deps.registry,
      "hookpost_ingest_attempt_index_lag_records",
      "attempt-log records stored and not yet indexed by this replica (not searchable here yet)",
      () => index.lag,
    );
  }
  const search = new AttemptSearch(stores.jsm, index);
  // A dead letter kept without its body replays with its routing record's, found through the index.
  stores.deadLetters.useRoutedBodies(
    async (sourceId, messageId, timeMs) =>
      (await search.routedOf(sourceId, messageId, { timeMs })).find((r) => r.body !== undefined)?.body,
  );
  const health = new HealthAggregate(deps.nc, log);
  health.start();
  // A deleted destination's health is forgotten with it.
  stores.config.on("change", (c) => {
    if (c.kind === "destination" && !c.record) health.forget(c.id);
  });
  const service = adminService({
    store: stores.config,
    jsm: stores.jsm,
    attempts: new AttemptReader(search),
    search,
    health,
    log,
    adminAuth: deps.adminAuth,
    natsConnected: deps.natsConnected,
    onSourceDeleted: (id) => stores.index.forgetSource(id),
    deadLetters: stores.deadLetters,
    auditLog: stores.auditLog,
    ...(deps.onAuditOutcomeLost ? { onAuditOutcomeLost: deps.onAuditOutcomeLost } : {}),
    deletions: stores.deletions,
    portalLinks: stores.portalLinks,
    consoleUrl: deps.consoleUrl,
    auditShareBytes: deps.auditShareBytes,
    ...(deps.retryBounds ? { retryBounds: deps.retryBounds } : {}),
  });
  return {
    service,
    close: () => {
      health.close();
      index.close();
    },
  };
}
