import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ADMIN_PAGE_MAX_BYTES,
  ADMIN_PAGES,
  answerBytes,
  Code,
  type FieldViolation,
  HookpostError,
  PageBudget,
  pageSize,
  pageSizeViolation,
} from "@hookpost/contract";
import {
  AttemptOutcome,
  type AttemptSchema,
  DeliveryState,
  type MessageDeliverySchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type {
  AttemptReader,
  AttemptRecord,
  ConfigStore,
  DeadLetters,
  OutcomeKind,
  RoutedRecord,
  Stored,
} from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { logFilterViolations, notFound, requiredIdViolations, timeFilter } from "./ids.js";
import { beforeSequence } from "./sequence-token.js";
import type { AdminHandlers } from "./sources.js";

export interface AttemptDeps {
  store: ConfigStore;
  attempts: AttemptReader;
  deadLetters: DeadLetters;
}

const MAX_MESSAGE_ID = 256;

/** The filter reason of a destination that the call's integrations turned off. */
const INTEGRATIONS_FILTERED = "integrations: webhooks turned off";

/**
 * ListAttempts and GetMessage over the attempt log. A destination id that is neither
 * configured nor present in the log is NOT_FOUND, so a typo is never an empty, reassuring answer.
 */
export function attemptHandlers(deps: AttemptDeps) {
  return {
    listAttempts: async (req) => {
      const violations = logFilterViolations(req);
      if (req.messageId.length > MAX_MESSAGE_ID) {
        violations.push({ field: "message_id", description: `is too long: at most ${MAX_MESSAGE_ID}` });
      }
      const size = pageSize(req.pageSize, ADMIN_PAGES.attempts);
      if (size === undefined) violations.push(pageSizeViolation(ADMIN_PAGES.attempts));
      const before = beforeSequence(req.pageToken, violations);
      const sinceMs = timeFilter(req.since, "since", violations);
      throwIfInvalid(violations);
      const page = await deps.attempts.list({
        ...(req.destinationId ? { destinationId: req.destinationId } : {}),
        ...(req.messageId ? { messageId: req.messageId } : {}),
        ...(req.sourceId ? { sourceId: req.sourceId } : {}),
        failedOnly: req.failedOnly,
        ...(sinceMs === undefined ? {} : { sinceMs }),
        pageSize: size ?? ADMIN_PAGES.attempts.default,
        ...(before === undefined ? {} : { beforeSequence: before }),
        maxBytes: ADMIN_PAGE_MAX_BYTES,
      });
      if (req.destinationId && page.attempts.length === 0 && before === undefined) {
        if (!deps.store.destination(req.destinationId)) {
          throw notFound("destination", req.destinationId);
        }
      }
      return {
        attempts: page.attempts.map((a) => attemptToProto(a)),
        nextPageToken: page.nextBefore === undefined ? "" : String(page.nextBefore),
      };
    },

    getMessage: async (req) => {
      const violations: FieldViolation[] = [];
      if (req.messageId === "" || req.messageId.length > MAX_MESSAGE_ID) {
        violations.push({
          field: "message_id",
          description: `is required, at most ${MAX_MESSAGE_ID} characters`,
        });
      }
      if (req.sourceId !== "") violations.push(...requiredIdViolations(req.sourceId, "source_id"));
      throwIfInvalid(violations);
      const found = await deps.attempts.forMessage(req.messageId, req.sourceId || undefined);
      const records = found.records;
      if (records.length === 0) {
        throw new HookpostError(
          Code.NOT_FOUND,
          req.sourceId
            ? `no record of message "${req.messageId}" from source "${req.sourceId}" (never received, or older than ATTEMPT_LOG_MAX_AGE)`
            : `no record of message "${req.messageId}" (never received, or older than ATTEMPT_LOG_MAX_AGE)`,
        );
      }
      // A message is identified by (source, message id): never mix two sources' calls.
      const sources = [...new Set(records.map((r) => r.sourceId))].sort();
      if (sources.length > 1) {
        throwIfInvalid([
          {
            field: "source_id",
            description: `is required: sources ${sources.map((s) => `"${s}"`).join(", ")} used message id "${req.messageId}"`,
          },
        ]);
      }
      const routed = records.filter((r): r is Stored<RoutedRecord> => r.kind === "routed");
      const attempts = records.filter((r): r is Stored<AttemptRecord> => r.kind === "attempt");
      const first = routed[0];
      const destinations = new Set<string>([
        ...routed.flatMap((r) => [
          ...r.destinations,
          ...(r.consentFiltered ?? []).map((c) => c.destinationId),
        ]),
        ...records.flatMap((r) => (r.kind === "routed" ? [] : [r.destinationId])),
      ]);
      const deliveries: MessageInitShape<typeof MessageDeliverySchema>[] = [];
      for (const id of destinations) {
        // FAN_OUT: one delivery per URL, each its own (docs/design/shaping.md 7.2).
        const urls = fanOutUrls(id, records);
        if (urls === undefined) deliveries.push(await deliveryState(id, records, deps.deadLetters));
        else
          for (let i = 0; i < urls; i++)
            deliveries.push(await deliveryState(id, records, deps.deadLetters, i));
      }
      const routedBody = routed.find((r) => r.body)?.body;
      const body =
        routedBody ??
        attempts.find((r) => r.requestBody)?.requestBody ??
        (await deadLetterBody(deliveries, deps.deadLetters));
      // The newest attempts that fit beside the body; older ones are one ListAttempts away.
      const page = new PageBudget();
      page.add(answerBytes(body ?? ""));
      const kept: MessageInitShape<typeof AttemptSchema>[] = [];
      for (let i = attempts.length - 1; i >= 0; i--) {
        const a = attemptToProto(attempts[i]!, routedBody);
        const bytes = answerBytes(a.url ?? "", a.reason ?? "", a.responseBody ?? "", a.requestBody ?? "");
        if (!page.fits(bytes)) break;
        page.add(bytes);
        kept.push(a);
      }
      return {
        messageId: req.messageId,
        sourceId: sources[0]!,
        body: body ?? "",
        ...(first ? { receivedTime: timestampFromDate(new Date(first.receivedAt)) } : {}),
        deliveries,
        noDestination: routed.length > 0 && destinations.size === 0,
        attempts: kept.reverse(),
        attemptsTruncated: found.truncated || kept.length < attempts.length,
      };
    },
  } satisfies AdminHandlers;
}

/** Where one destination stands: the last word in the log decides, checked against DEAD. */
async function deliveryState(
  destinationId: string,
  records: Stored[],
  deadLetters: DeadLetters,
  urlIndex?: number,
): Promise<MessageInitShape<typeof MessageDeliverySchema>> {
  const mine = records.filter(
    (r) => r.kind !== "routed" && r.destinationId === destinationId && r.urlIndex === urlIndex,
  );
  const attempts = new Set(mine.flatMap((r) => (r.kind === "attempt" ? [r.attemptNumber] : []))).size;
  const filterReason = filterReasonOf(destinationId, records);
  const last = mine.at(-1);
  const base = { destinationId, attempts, ...(urlIndex === undefined ? {} : { urlIndex }) };
  if (filterReason !== undefined && !last) return { ...base, state: DeliveryState.FILTERED, filterReason };
  if (!last) return { ...base, state: DeliveryState.PENDING };
  if (last.kind === "dead") {
    // Replayed since: the record is gone and the delivery waits again.
    const letter = await deadLetters.get(destinationId, last.deadSequence);
    return letter
      ? { ...base, state: DeliveryState.DEAD_LETTER, deadLetterSequence: BigInt(last.deadSequence) }
      : { ...base, state: DeliveryState.PENDING };
  }
  if (last.kind !== "attempt") return { ...base, state: DeliveryState.PENDING };
  if (last.outcome === "success") return { ...base, state: DeliveryState.DELIVERED };
  // The filter, changed while the call waited, refused it at its attempt: done, not sent.
  if (last.outcome === "filtered")
    return { ...base, state: DeliveryState.FILTERED, filterReason: last.reason };
  if (last.nextAttemptTime) {
    return {
      ...base,
      state: DeliveryState.RETRYING,
      nextAttemptTime: timestampFromDate(new Date(last.nextAttemptTime)),
    };
  }
  // Failed for good: its dead record is on its way (written right after).
  return { ...base, state: DeliveryState.DEAD_LETTER };
}

/**
 * How many URLs a FAN_OUT destination's call went to (its routed record), else as many as its
 * records name; undefined for a FAILOVER delivery.
 */
function fanOutUrls(destinationId: string, records: Stored[]): number | undefined {
  let n: number | undefined;
  for (const r of records) {
    if (r.kind === "routed") {
      const fanned = r.fanOut?.[destinationId];
      if (fanned !== undefined) n = Math.max(n ?? 0, fanned);
    } else if (r.destinationId === destinationId && r.urlIndex !== undefined) {
      n = Math.max(n ?? 0, r.urlIndex + 1);
    }
  }
  return n;
}

/**
 * Why the router did not send the call to this destination: its integrations turned webhooks off,
 * or it did not grant the destination's consent categories (the rule's reason). Undefined when a
 * routed record sent it there.
 */
function filterReasonOf(destinationId: string, records: Stored[]): string | undefined {
  let reason: string | undefined;
  for (const r of records) {
    if (r.kind !== "routed") continue;
    if (r.destinations.includes(destinationId)) {
      if (!r.filtered) return undefined;
      reason ??= INTEGRATIONS_FILTERED;
    }
    reason ??= r.consentFiltered?.find((c) => c.destinationId === destinationId)?.reason;
  }
  return reason;
}

async function deadLetterBody(
  deliveries: MessageInitShape<typeof MessageDeliverySchema>[],
  deadLetters: DeadLetters,
): Promise<string | undefined> {
  for (const d of deliveries) {
    if (d.deadLetterSequence && d.destinationId) {
      const letter = await deadLetters.get(d.destinationId, Number(d.deadLetterSequence));
      if (letter) return letter.body;
    }
  }
  return undefined;
}

const OUTCOMES: Record<OutcomeKind, AttemptOutcome> = {
  success: AttemptOutcome.SUCCESS,
  redirect: AttemptOutcome.REDIRECT,
  client_error: AttemptOutcome.CLIENT_ERROR,
  server_error: AttemptOutcome.SERVER_ERROR,
  timeout: AttemptOutcome.TIMEOUT,
  connection: AttemptOutcome.CONNECTION,
  tls: AttemptOutcome.TLS,
  ssrf: AttemptOutcome.SSRF,
  invalid_response: AttemptOutcome.INVALID_RESPONSE,
  not_sent: AttemptOutcome.NOT_SENT,
  filtered: AttemptOutcome.FILTERED,
};

/** `requestBody`: the call's body from its routed record, for records that do not carry it. */
export function attemptToProto(
  r: Stored<AttemptRecord>,
  requestBody?: string,
): MessageInitShape<typeof AttemptSchema> {
  return {
    sequence: BigInt(r.sequence),
    messageId: r.messageId,
    destinationId: r.destinationId,
    sourceId: r.sourceId,
    url: r.url,
    attemptNumber: r.attemptNumber,
    startTime: timestampFromDate(new Date(r.startTime)),
    durationMs: r.durationMs,
    outcome: OUTCOMES[r.outcome] ?? AttemptOutcome.UNSPECIFIED,
    status: r.status,
    reason: r.reason,
    retryable: r.retryable,
    responseBody: r.responseBody,
    requestBody: r.requestBody ?? requestBody ?? "",
    ...(r.nextAttemptTime ? { nextAttemptTime: timestampFromDate(new Date(r.nextAttemptTime)) } : {}),
    ...(r.urlIndex === undefined ? {} : { urlIndex: r.urlIndex }),
  };
}
