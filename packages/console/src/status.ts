import { type Timestamp, timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  type Attempt,
  AttemptOutcome,
  BreakerState,
  type DestinationHealth,
  DestinationState,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { percent, relative, span, toDate } from "./format.js";

/**
 * A destination is behind when the oldest call waiting for it has waited longer than this: a
 * healthy destination delivers within a couple of seconds.
 */
export const BEHIND_AFTER_MS = 60_000;

/** Worst first: the overview lists destinations in this order. */
const KINDS = ["failing", "disabled", "behind", "paused", "delivering", "idle", "unknown"] as const;
export type StatusKind = (typeof KINDS)[number];

/** The kinds the overview lists under "Needs attention". */
export const NEEDS_ATTENTION: ReadonlySet<StatusKind> = new Set(["failing", "disabled", "behind", "paused"]);

export interface Status {
  kind: StatusKind;
  /** The badge's text and colour. */
  label: string;
  badge: "ok" | "bad" | "warn" | "idle";
  /** One sentence: where it stands. */
  headline: string;
  /** Why, one fact a line: the last failure and its reason, the breaker, the calls waiting… */
  why: string[];
}

export interface StatusInput {
  enabled: boolean;
  /** Set when Hookpost paused it (410 Gone, failing for too long). */
  disabledReason: string;
  /** ListDestinationHealth's figures; absent when the server could not give them. */
  health?: DestinationHealth | undefined;
  /** The newest attempts, newest first (the destination page reads them; the overview does not). */
  recent?: Attempt[] | undefined;
  now?: number;
}

const ms = (ts: Timestamp | undefined) => toDate(ts)?.getTime();
const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** An attempt's failure as the attempt log shows it: "503: 503 is retried". */
function failureText(a: Attempt): string {
  const outcome = AttemptOutcome[a.outcome]?.toLowerCase().replace(/_/g, " ") ?? "failed";
  return a.status && !a.reason.includes(String(a.status))
    ? `${a.status} ${a.reason || outcome}`
    : a.reason || outcome;
}

/**
 * Where a destination stands, never more hopeful than its last attempts: a failed last attempt,
 * failures in a row or an open breaker make it failing whatever else is true; a paused one says
 * so (and why, when Hookpost paused it); a call waiting longer than BEHIND_AFTER_MS makes it
 * behind. Without any attempt it is not "delivering": it says that nothing was tried yet.
 */
export function destinationStatus(input: StatusInput): Status {
  const { health: h, recent } = input;
  const now = input.now ?? Date.now();
  const ago = (t: number) => relative(timestampFromMs(t), now);

  // The newest attempts (a filtered call was not sent: it says nothing about the endpoint).
  const tried = (recent ?? []).filter((a) => a.outcome !== AttemptOutcome.FILTERED);
  const firstSuccess = tried.findIndex((a) => a.outcome === AttemptOutcome.SUCCESS);
  const recentFailures = firstSuccess === -1 ? tried.length : firstSuccess;
  const newestFailure = tried.find((a) => a.outcome !== AttemptOutcome.SUCCESS);
  const newestSuccess = tried.find((a) => a.outcome === AttemptOutcome.SUCCESS);

  // With the health figures (the last hour, every dispatcher replica).
  const lastFailureMs = Math.max(ms(h?.lastFailureTime) ?? 0, ms(newestFailure?.startTime) ?? 0);
  const lastSuccessMs = Math.max(ms(h?.lastSuccessTime) ?? 0, ms(newestSuccess?.startTime) ?? 0);
  const inRow = Math.max(h?.consecutiveFailures ?? 0, recentFailures);
  const breakerOpen = h?.breakerState === BreakerState.OPEN;
  const failing =
    inRow > 0 || h?.state === DestinationState.FAILING || breakerOpen || lastFailureMs > lastSuccessMs;
  const backlog = h ? Number(h.backlog) : 0;
  const oldestMs = ms(h?.oldestWaitingTime);
  const waited = oldestMs === undefined ? undefined : span(Math.max(0, now - oldestMs));

  const why: string[] = [];
  if (lastFailureMs > 0) {
    const reason =
      newestFailure && ms(newestFailure.startTime) === lastFailureMs
        ? failureText(newestFailure)
        : h?.lastFailureReason;
    why.push(`Last failure ${ago(lastFailureMs)}${reason ? `: ${reason}` : ""}`);
  }
  // A failing one says how many in its headline.
  if (inRow > 0 && !failing) why.push(`The last ${count(inRow, "attempt")} failed`);
  const nextRetryMs = ms(h?.nextRetryTime);
  if (failing && nextRetryMs !== undefined && nextRetryMs > now) {
    why.push(`Next retry in ${span(nextRetryMs - now)}`);
  }
  if (breakerOpen) {
    const untilMs = ms(h?.breakerOpenUntil);
    const until = untilMs !== undefined && untilMs > now ? ` for another ${span(untilMs - now)}` : "";
    const replicas = h?.breakerReplicas ? ` on ${count(h.breakerReplicas, "dispatcher replica")}` : "";
    why.push(`Circuit breaker open${until}${replicas}: calls are held back, then one tests the endpoint`);
  } else if (h?.breakerState === BreakerState.HALF_OPEN) {
    why.push("Circuit breaker half-open: the next call tests the endpoint");
  }
  const waitingLine = `${count(backlog, "call")} waiting${waited ? `, the oldest for ${waited}` : ""}`;
  if (backlog > 0) why.push(waitingLine);
  if (h && h.deliveries1h + h.failures1h > 0) {
    why.push(
      `Success ${percent(h.successRate1h, h.deliveries1h + h.failures1h)} over the last hour (${h.deliveries1h} delivered, ${h.failures1h} failed)`,
    );
  }
  if (lastSuccessMs > 0) why.push(`Last delivery ${ago(lastSuccessMs)}`);

  if (!input.enabled && input.disabledReason) {
    return {
      kind: "disabled",
      label: "paused by Hookpost",
      badge: "bad",
      headline: `Paused by Hookpost: ${input.disabledReason}. Calls wait until it is resumed.`,
      why,
    };
  }
  if (!input.enabled) {
    return {
      kind: "paused",
      label: "paused",
      badge: "idle",
      headline: "Paused; calls wait until it is resumed.",
      why,
    };
  }
  if (failing) {
    const what =
      inRow > 0
        ? `the last ${count(inRow, "attempt")} failed`
        : breakerOpen
          ? "its circuit breaker is open"
          : "the last attempt failed";
    return { kind: "failing", label: "failing", badge: "bad", headline: `Failing: ${what}.`, why };
  }
  if (backlog > 0 && oldestMs !== undefined && now - oldestMs > BEHIND_AFTER_MS) {
    return {
      kind: "behind",
      label: "behind",
      badge: "warn",
      headline: `Behind: ${waitingLine}.`,
      why: why.filter((w) => w !== waitingLine),
    };
  }
  if (lastSuccessMs > 0) {
    return {
      kind: "delivering",
      label: "delivering",
      badge: "ok",
      headline: `Delivering: the last attempt succeeded ${ago(lastSuccessMs)}.`,
      why,
    };
  }
  if (!h && recent === undefined) {
    return { kind: "unknown", label: "enabled", badge: "idle", headline: "Enabled.", why };
  }
  return {
    kind: "idle",
    label: "no attempt yet",
    badge: "idle",
    headline:
      recent === undefined
        ? "Enabled: no attempt in the last hour."
        : "Enabled: no attempt yet; calls are delivered as they arrive.",
    why,
  };
}

/** Orders destinations worst first: by kind, then the longest wait, then the most failures, then name. */
export function worstFirst(
  a: { status: Status; health?: DestinationHealth | undefined; name: string },
  b: { status: Status; health?: DestinationHealth | undefined; name: string },
): number {
  const byKind = KINDS.indexOf(a.status.kind) - KINDS.indexOf(b.status.kind);
  if (byKind !== 0) return byKind;
  const oldest = (x: typeof a) => ms(x.health?.oldestWaitingTime) ?? Number.MAX_SAFE_INTEGER;
  const byWait = oldest(a) - oldest(b);
  if (byWait !== 0) return byWait;
  const byFailures = (b.health?.failures1h ?? 0) - (a.health?.failures1h ?? 0);
  return byFailures !== 0 ? byFailures : a.name.localeCompare(b.name);
}
