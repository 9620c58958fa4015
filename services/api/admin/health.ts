import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ADMIN_PAGES, answerBytes, Code, HookpostError } from "@hookpost/contract";
import { type DestinationHealthSchema, DestinationState } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { ConfigStore, DestinationRecord, HealthAggregate } from "@hookpost/core";
import {
  DELIVERIES_STREAM,
  deliverySubject,
  destinationConsumer,
  isNotFound,
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

/** Consumer lookups of one page in flight at once. */
const LOOKUPS_IN_FLIGHT = 32;
/** The encoded 60 minute counts (about 20 bytes each), when sizing a page. */
const MINUTES_BYTES = 60 * 20;

const ts = (ms: number | undefined) => (ms === undefined ? {} : timestampFromDate(new Date(ms)));

/**
 * ListDestinationHealth: delivery figures from the in-memory aggregate of the attempt log, and
 * the backlog from the destination's consumer (waiting + unacknowledged, which includes calls
 * waiting for a retry and everything held while the destination is paused).
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
      // A few consumer lookups at a time, not one per destination at once.
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
  const [backlog, oldest] = await Promise.all([backlogOf(deps.jsm, d.id), oldestWaiting(deps.jsm, d.id)]);
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
  };
}

async function backlogOf(jsm: JetStreamManager, id: string): Promise<number> {
  try {
    const info = await jsm.consumers.info(DELIVERIES_STREAM, destinationConsumer(id));
    return info.num_pending + info.num_ack_pending;
  } catch (err) {
    // No dispatcher created it yet: whatever the router stored for it is waiting.
    if (!isNotFound(err)) throw err;
    const info = await jsm.streams.info(DELIVERIES_STREAM, { subjects_filter: deliverySubject(id) });
    return info.state.subjects?.[deliverySubject(id)] ?? 0;
  }
}

/** DELIVERIES is a work queue: the first message left on the subject is the oldest waiting. */
async function oldestWaiting(jsm: JetStreamManager, id: string): Promise<Date | undefined> {
  try {
    const query = { seq: 1, next_by_subj: deliverySubject(id) } as unknown as { seq: number };
    return (await jsm.streams.getMessage(DELIVERIES_STREAM, query)).time;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
