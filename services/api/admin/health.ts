import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ADMIN_PAGES, answerBytes } from "@hookpost/contract";
import {
  BreakerState,
  type DestinationHealthSchema,
  DestinationState,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { BreakerFigures, ConfigStore, DestinationRecord, HealthAggregate } from "@hookpost/core";
import { targetId } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { throwIfInvalid } from "../invalid.js";
import { notFound, requiredIdViolations } from "./ids.js";
import { pageOf } from "./paging.js";
import { type Pending, pendingOf } from "./pending.js";
import type { AdminHandlers } from "./sources.js";

export interface HealthDeps {
  store: ConfigStore;
  jsm: JetStreamManager;
  health: HealthAggregate;
}

/** The encoded 60 minute counts (about 20 bytes each), when sizing a page. */
const MINUTES_BYTES = 60 * 20;

const ts = (ms: number | undefined) => (ms === undefined ? {} : timestampFromDate(new Date(ms)));

const BREAKER_STATES: Record<BreakerFigures["state"], BreakerState> = {
  closed: BreakerState.CLOSED,
  open: BreakerState.OPEN,
  half_open: BreakerState.HALF_OPEN,
};

/**
 * ListDestinationHealth: delivery figures and the breaker from the in-memory aggregate of the
 * attempt log's health summaries, and the backlog from what is stored for each destination
 * (pending.ts).
 */
export function healthHandlers(deps: HealthDeps) {
  return {
    listDestinationHealth: async (req) => {
      let list: DestinationRecord[];
      let nextPageToken = "";
      if (req.destinationId === "") {
        // Health is about the size of its 60 minutes: sized before the figures are read.
        const paged = pageOf(
          deps.store.destinations(),
          req,
          ADMIN_PAGES.destinationHealth,
          (d) =>
            answerBytes(d.id, d.name, d.disabledReason ?? "", deps.health.figures(d.id).lastFailureReason) +
            MINUTES_BYTES,
        );
        list = paged.page;
        nextPageToken = paged.nextPageToken;
      } else {
        throwIfInvalid(requiredIdViolations(req.destinationId, "destination_id"));
        const d = deps.store.destination(req.destinationId);
        if (!d) throw notFound("destination", req.destinationId);
        list = [d];
      }
      // A FAN_OUT destination's calls wait per URL (its delivery targets): counted together.
      const idsOf = (d: DestinationRecord) =>
        d.deliveryMode === "FAN_OUT" ? [d.id, ...d.urls.map((_, i) => targetId(d.id, i))] : [d.id];
      const pending = await pendingOf(deps.jsm, list.flatMap(idsOf));
      const destinations = list.map((d) =>
        health(deps, d, sumPending(idsOf(d).map((id) => pending.get(id)))),
      );
      return { destinations, nextPageToken };
    },
  } satisfies AdminHandlers;
}

function sumPending(parts: Array<Pending | undefined>): Pending {
  let backlog = 0;
  let oldest: Date | undefined;
  for (const p of parts) {
    backlog += p?.backlog ?? 0;
    if (p?.oldest && (!oldest || p.oldest < oldest)) oldest = p.oldest;
  }
  return oldest ? { backlog, oldest } : { backlog };
}

function health(
  deps: HealthDeps,
  d: DestinationRecord,
  { backlog, oldest }: Pending,
): MessageInitShape<typeof DestinationHealthSchema> {
  const f = deps.health.figures(d.id);
  // Set by auto-disable (another part of Hookpost) when it paused the destination itself.
  const disabledReason = (d as { disabledReason?: string }).disabledReason ?? "";
  const state = d.enabled
    ? f.consecutiveFailures > 0
      ? DestinationState.FAILING
      : DestinationState.DELIVERING
    : disabledReason
      ? DestinationState.AUTO_DISABLED
      : DestinationState.PAUSED;
  return {
    destinationId: d.id,
    name: d.name,
    state,
    disabledReason,
    backlog: BigInt(backlog),
    ...(oldest === undefined ? {} : { oldestWaitingTime: timestampFromDate(oldest) }),
    deliveries5m: f.deliveries5m,
    failures5m: f.failures5m,
    deliveries1h: f.deliveries1h,
    failures1h: f.failures1h,
    successRate1h: f.successRate1h,
    ...(f.lastSuccessMs === undefined ? {} : { lastSuccessTime: ts(f.lastSuccessMs) }),
    ...(f.lastFailureMs === undefined ? {} : { lastFailureTime: ts(f.lastFailureMs) }),
    lastFailureReason: f.lastFailureReason,
    consecutiveFailures: f.consecutiveFailures,
    ...(f.nextRetryMs === undefined ? {} : { nextRetryTime: ts(f.nextRetryMs) }),
    incomingPerSecond: f.incomingPerSecond,
    deliveredPerSecond: f.deliveredPerSecond,
    minutes: f.minutes.map((m) => ({
      startTime: timestampFromDate(new Date(m.startMs)),
      delivered: m.delivered,
      failed: m.failed,
    })),
    breakerState: BREAKER_STATES[f.breaker.state],
    ...(f.breaker.untilMs === undefined ? {} : { breakerOpenUntil: ts(f.breaker.untilMs) }),
    breakerReplicas: f.breaker.replicas,
  };
}
