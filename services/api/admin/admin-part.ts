import { AttemptReader, HealthAggregate, type Logger, type ServiceImpl } from "@hookpost/core";
import type { NatsConnection } from "nats";
import type { AdminAuth } from "../auth.js";
import type { Stores } from "../stores.js";
import { adminService } from "./admin-service.js";
import type { AdminMethods } from "./sources.js";

/** AdminService (gRPC and, through the console handler, Connect) with the destination-health feed it reads. */
export interface AdminPart {
  readonly service: ServiceImpl<AdminMethods>;
  close(): void;
}

export function startAdmin(deps: {
  nc: NatsConnection;
  stores: Stores;
  adminAuth: AdminAuth;
  natsConnected: () => boolean;
  log: Logger;
  /** An admin write's audit outcome could not be stored (a metric). */
  onAuditOutcomeLost?: () => void;
  /** RETRY_WINDOW and RETRY_MAX_DELAY: what a destination's own retry schedule must stay within. */
  retryBounds?: { windowMs: number; maxDelayMs: number };
  /** CONSOLE_URL: portal link URLs start with it. */
  consoleUrl?: string | undefined;
}): AdminPart {
  const { stores, log } = deps;
  const health = new HealthAggregate(deps.nc, log);
  health.start();
  // A deleted destination's health is forgotten with it.
  stores.config.on("change", (c) => {
    if (c.kind === "destination" && !c.record) health.forget(c.id);
  });
  const service = adminService({
    store: stores.config,
    jsm: stores.jsm,
    attempts: new AttemptReader(stores.jsm),
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
    ...(deps.retryBounds ? { retryBounds: deps.retryBounds } : {}),
  });
  return { service, close: () => health.close() };
}
