import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ADMIN_PAGES, answerBytes, Code, HookpostError } from "@hookpost/contract";
import {
  BreakerState,
  type DestinationHealthSchema,
  DestinationState,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { BreakerFigures, ConfigStore, DestinationRecord, HealthAggregate } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  deliverySubjects,
  isNotFound,
  laneSubject,
  legacyDeliverySubject,
  ORDERED_STREAM,
  orderedSubjectsOf,
  type ServiceImpl,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { throwIfInvalid } from "../invalid.js";
import { requiredIdViolations } from "./ids.js";
import { pageOf } from "./paging.js";
import type { AdminMethods } from "./sources.js";

export interface HealthDeps {
  store: ConfigStore;
  jsm: JetStreamManager;
  health: HealthAggregate;
}

/** Destinations of one page looked up at once (each a few stream lookups). */
const LOOKUPS_IN_FLIGHT = 32;
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
 * attempt log's health summaries, and the backlog from what is stored for the destination
 * (work-queue streams keep a call until it is delivered or dead-lettered, so the count includes
 * calls in flight, waiting for a retry, and held while paused or while the breaker is open).
 */
export function healthHandlers(deps: HealthDeps): Pick<ServiceImpl<AdminMethods>, "listDestinationHealth"> {
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
        if (!d) throw new HookpostError(Code.NOT_FOUND, `destination "${req.destinationId}" does not exist`);
        list = [d];
      }
      // A few destinations' lookups at a time, not every one at once.
      const destinations: MessageInitShape<typeof DestinationHealthSchema>[] = [];
      for (let i = 0; i < list.length; i += LOOKUPS_IN_FLIGHT) {
        destinations.push(
          ...(await Promise.all(list.slice(i, i + LOOKUPS_IN_FLIGHT).map((d) => health(deps, d)))),
        );
      }
      return { destinations, nextPageToken };
    },
  };
}

async function health(
  deps: HealthDeps,
  d: DestinationRecord,
): Promise<MessageInitShape<typeof DestinationHealthSchema>> {
  const f = deps.health.figures(d.id);
  const { backlog, oldest } = await pendingOf(deps.jsm, d.id);
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

/**
 * Where a destination's calls are stored: every partition of the shared lane, its own lane, the
 * subject of before issue 24 (until a start moved it), and its users' ordered subjects.
 */
const pendingFilters = (id: string): [string, string][] => [
  [DELIVERIES_STREAM, deliverySubjects(id)],
  [DELIVERIES_STREAM, laneSubject(id)],
  [DELIVERIES_STREAM, legacyDeliverySubject(id)],
  [ORDERED_STREAM, orderedSubjectsOf(id)],
];

/** Calls stored for the destination, and when the oldest of them was stored. */
async function pendingOf(jsm: JetStreamManager, id: string): Promise<{ backlog: number; oldest?: Date }> {
  const parts = await Promise.all(
    pendingFilters(id).map(async ([stream, filter]) => {
      const count = await countOf(jsm, stream, filter);
      // Only where something waits: a lookup on an empty filter may walk the stream for nothing.
      return { count, oldest: count === 0 ? undefined : await firstStored(jsm, stream, filter) };
    }),
  );
  let oldest: Date | undefined;
  for (const p of parts) if (p.oldest && (!oldest || p.oldest < oldest)) oldest = p.oldest;
  return { backlog: parts.reduce((n, p) => n + p.count, 0), ...(oldest ? { oldest } : {}) };
}

/** Messages on the subjects matching `filter` (the server's per-subject counts). */
async function countOf(jsm: JetStreamManager, stream: string, filter: string): Promise<number> {
  try {
    const info = await jsm.streams.info(stream, { subjects_filter: filter });
    return Object.values(info.state.subjects ?? {}).reduce((n, c) => n + c, 0);
  } catch (err) {
    // ORDERED comes with the dispatcher of issue 24: an older one never created it.
    if (isNotFound(err)) return 0;
    throw err;
  }
}

/** Both streams keep a call until it is finished: the first stored on the filter is the oldest waiting. */
async function firstStored(jsm: JetStreamManager, stream: string, filter: string): Promise<Date | undefined> {
  try {
    const query = { seq: 1, next_by_subj: filter } as unknown as { seq: number };
    return (await jsm.streams.getMessage(stream, query)).time;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
