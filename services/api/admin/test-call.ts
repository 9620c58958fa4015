import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, HookpostError } from "@hookpost/contract";
import {
  type AttemptReader,
  type AttemptRecord,
  type ConfigStore,
  publishTestCall,
  renderBody,
  type Stored,
} from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { throwIfInvalid } from "../invalid.js";
import { attemptToProto } from "./attempts.js";
import { dryRunCall } from "./dry-run.js";
import { notFound, requiredIdViolations } from "./ids.js";
import type { AdminHandlers } from "./sources.js";

export interface TestCallDeps {
  store: ConfigStore;
  jsm: JetStreamManager;
  attempts: AttemptReader;
  now?: () => Date;
  /** How long to wait for the attempt's records (default 60 s: 5 URLs × a 5 s timeout, and margin). */
  testCallWaitMs?: number;
}

const DEFAULT_CALL = JSON.stringify({ type: "track", userId: "hookpost-test", event: "Hookpost Test Call" });
/** How often the attempt log is read while the test call is under way. */
const POLL_MS = 100;

/**
 * SendTestCall: one synthetic call stored for one destination on DELIVERIES, marked as a test
 * (core's TEST_CALL_HEADER), so a dispatcher sends it through the real path at once; the answer is
 * that attempt's records, read back from the attempt log once the attempt is over.
 */
export function testCallHandler(deps: TestCallDeps) {
  const now = deps.now ?? (() => new Date());
  return {
    sendTestCall: async (req) => {
      throwIfInvalid(requiredIdViolations(req.destinationId, "destination_id"));
      const dest = deps.store.destination(req.destinationId);
      if (!dest) throw notFound("destination", req.destinationId);
      const sourceId = dest.sourceIds[0] ?? "";
      const call = dryRunCall(req.callJson === "" ? DEFAULT_CALL : req.callJson, sourceId, now());
      const messageId = `test_${randomBytes(12).toString("base64url")}`;
      await publishTestCall(deps.jsm.jetstream(), {
        destinationId: dest.id,
        messageId,
        sourceId,
        body: renderBody({ ...call, messageId }),
        call,
      });
      const deadline = Date.now() + (deps.testCallWaitMs ?? 60_000);
      while (Date.now() < deadline) {
        const records = (await deps.attempts.forMessage(messageId)).records.filter(
          (r): r is Stored<AttemptRecord> => r.kind === "attempt" && r.destinationId === dest.id,
        );
        if (attemptOver(records, dest.urls.length, dest.deliveryMode === "FAN_OUT")) {
          return { messageId, attempts: records.map((r) => attemptToProto(r)) };
        }
        await sleep(POLL_MS);
      }
      throw new HookpostError(
        Code.DEADLINE_EXCEEDED,
        `the test call ${messageId} was stored, but no dispatcher recorded its attempt within ${Math.round((deps.testCallWaitMs ?? 60_000) / 1000)} s: is a dispatcher running?`,
      );
    },
  } satisfies AdminHandlers;
}

/**
 * Whether the records hold the whole attempt: one URL answered (2xx), nothing was sent (filtered,
 * not sent), or every URL was tried. Records of one attempt are written together, but may be read
 * while the later ones are still being stored. FAN_OUT: every URL has its own record (its target's).
 */
function attemptOver(records: readonly AttemptRecord[], urls: number, fanOut: boolean): boolean {
  if (fanOut) return new Set(records.map((r) => r.urlIndex)).size >= urls;
  const last = records.at(-1);
  if (!last) return false;
  return (
    last.outcome === "success" ||
    last.outcome === "filtered" ||
    last.outcome === "not_sent" ||
    records.length >= urls
  );
}
