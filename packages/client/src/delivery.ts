import { setTimeout as sleep } from "node:timers/promises";
import { Code, HookpostError } from "@hookpost/contract";
import type { BatchRequest } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import type { DebugLog } from "./debug.js";
import type { QueuedCall } from "./queue.js";
import { backoffDelay, isRetryable } from "./retry.js";
import { batchRequestOf } from "./wire.js";

/** Sends one BatchRequest; rejects with what the transport or server answered. */
export type SendBatch = (request: BatchRequest, signal: AbortSignal) => Promise<unknown>;

export interface RetryPolicy {
  maxRetries: number;
  retryInitialDelayMs: number;
  retryMaxDelayMs: number;
}

export interface FailedGroup {
  calls: QueuedCall[];
  error: HookpostError;
  attempts: number;
}

export interface DeliveryResult {
  delivered: QueuedCall[];
  failed: FailedGroup[];
}

/**
 * Delivers one batch: retries transient failures with backoff (same bytes, same message ids), and
 * when the server refuses named calls (INVALID_ARGUMENT with `calls[i]` violations; the batch is
 * all-or-nothing) fails only those and sends the others again, so one bad call cannot take down
 * its neighbours; a batch refused as a whole (more calls than the server's MAX_BATCH_CALLS) goes
 * again in halves. Never rejects.
 */
export async function deliverBatch(
  calls: QueuedCall[],
  send: SendBatch,
  policy: RetryPolicy,
  signal: AbortSignal,
  log: DebugLog,
): Promise<DeliveryResult> {
  const failed: FailedGroup[] = [];
  let pending = calls;
  let retries = 0;
  let attempts = 0;
  while (pending.length > 0) {
    if (signal.aborted) {
      failed.push({ calls: pending, error: closedError(), attempts });
      break;
    }
    attempts++;
    try {
      await send(batchRequestOf(pending.map((c) => c.frame)), signal);
      log("batch of %d calls stored (attempt %d)", pending.length, attempts);
      return { delivered: pending, failed };
    } catch (err) {
      const error = signal.aborted ? closedError() : HookpostError.fromServiceError(err);
      if (isRetryable(error.code) && retries < policy.maxRetries) {
        // The server's RetryInfo (a source quota, a full stream) is a floor, within the cap.
        const delay = Math.max(
          backoffDelay(retries++, policy.retryInitialDelayMs, policy.retryMaxDelayMs),
          Math.min(error.retryAfterMs ?? 0, policy.retryMaxDelayMs),
        );
        log(
          "batch of %d calls failed (%s: %s); retry %d in %d ms",
          pending.length,
          error.codeName,
          error.message,
          retries,
          delay,
        );
        try {
          // Unref'd: a pending retry alone does not keep the process alive (flush()/close() do).
          await sleep(delay, undefined, { signal, ref: false });
        } catch {
          // Aborted by close(): reported at the top of the loop.
        }
        continue;
      }
      if (error.code === Code.INVALID_ARGUMENT && pending.length > 1 && refusesBatch(error)) {
        // The batch as a whole is too large for this server (its MAX_BATCH_CALLS may be below the
        // contract's default we cut at): nothing was stored, so halves go again, same ids.
        log("server refused a batch of %d calls as a whole; sending it in halves", pending.length);
        const half = Math.ceil(pending.length / 2);
        const parts = [pending.slice(0, half), pending.slice(half)];
        const delivered: QueuedCall[] = [];
        for (const part of parts) {
          const r = await deliverBatch(part, send, policy, signal, log);
          delivered.push(...r.delivered);
          failed.push(...r.failed);
        }
        return { delivered, failed };
      }
      const refused =
        error.code === Code.INVALID_ARGUMENT ? refusedIndexes(error, pending.length) : undefined;
      if (refused && refused.size < pending.length) {
        log("server refused %d of %d calls; sending the others again", refused.size, pending.length);
        failed.push({ calls: pending.filter((_, i) => refused.has(i)), error, attempts });
        pending = pending.filter((_, i) => !refused.has(i));
        continue;
      }
      log("batch of %d calls failed for good (%s: %s)", pending.length, error.codeName, error.message);
      failed.push({ calls: pending, error, attempts });
      break;
    }
  }
  return { delivered: [], failed };
}

/** True when a violation is about the batch itself (`calls`: too many calls or bytes), not one call. */
function refusesBatch(error: HookpostError): boolean {
  return error.fieldViolations.some((v) => v.field === "calls");
}

/** Indexes named by `calls[i]…` field violations; undefined when any violation names no call. */
function refusedIndexes(error: HookpostError, count: number): Set<number> | undefined {
  if (error.fieldViolations.length === 0) return undefined;
  const out = new Set<number>();
  for (const v of error.fieldViolations) {
    const m = /^calls\[(\d+)\]/.exec(v.field);
    const i = m ? Number(m[1]) : -1;
    if (i < 0 || i >= count) return undefined;
    out.add(i);
  }
  return out;
}

function closedError(): HookpostError {
  return new HookpostError(
    Code.CANCELLED,
    "the client was closed before the batch was delivered (the server may or may not have stored it)",
  );
}
