import { EVENTS_STREAM, ensureRouterConsumer, ROUTER_CONSUMER } from "@hookpost/core";
import type { DispatcherConfig } from "./config.js";
import type { CoreDeps } from "./delivery-core.js";
import { Puller } from "./puller.js";
import { Router } from "./router.js";

/** The router: pulls EVENTS and fans each event out to its destinations' subjects on DELIVERIES. */
export function startRouting(config: DispatcherConfig, deps: CoreDeps): Puller {
  const { conns, core, metrics, logger } = deps;
  const router = new Router({
    publisher: conns.pipe,
    store: conns.store,
    metrics,
    logger,
    attemptLog: core.attemptLog,
    orderedPartitions: config.orderedPartitions,
    deliveryPartitions: config.deliveryPartitions,
    answering: (id) => core.deliveries.answering(id),
    onLane: (id) => core.deliveries.lanes.open(id),
    // Off, the router does not even ask (no extra promise per delivery).
    ...(config.directDelivery && { direct: (id, make) => core.deliveries.direct(id, make) }),
  });
  const puller = new Puller({
    js: conns.js,
    stream: EVENTS_STREAM,
    consumer: ROUTER_CONSUMER,
    concurrency: config.routerConcurrency,
    expiresMs: config.pullExpiresMs,
    handle: (msg) => router.handle(msg),
    acks: conns.acks,
    ackReplay: conns.ackReplay,
    connection: conns.connection,
    logger,
    // Nothing else creates it while the services run: without it, no call would be routed again.
    recreate: () => ensureRouterConsumer(conns.jsm),
  });
  puller.resume();
  return puller;
}
