import { setTimeout as sleep } from "node:timers/promises";
import type { StoredCall } from "@hookpost/contract";
import { Code, HookpostError } from "@hookpost/contract";
import type { Logger } from "@hookpost/core";
import {
  ConnectionState,
  countIfFull,
  EVENTS_STREAM,
  eventSubject,
  isNoResponders,
  isTransient,
  PipelinedPublisher,
  type PubAckLite,
  PublishError,
  STREAM_FULL_RETRY_AFTER_MS,
  startPublishSpan,
  type TraceContext,
} from "@hookpost/core";
import { headers, type MsgHdrs, type NatsConnection } from "nats";

export interface PublisherOptions {
  /** How long JetStream has to confirm one call. */
  timeoutMs: number;
  /** Observes each publish (for metrics). */
  onPublished?: (type: StoredCall["type"], outcome: PublishOutcome, ms: number) => void;
}

export type PublishOutcome = "stored" | "duplicate" | "unavailable" | "full" | "error";

/** What a publish added to EVENTS: the bytes the stream counts, and the highest sequence (0: a duplicate). */
export interface Published {
  bytes: number;
  seq: number;
}

/** What the stream counts for a message besides its subject, data and message id (record, header framing). */
const STORE_OVERHEAD_BYTES = 61; // measured on nats-server 2.9.10 (file store)
const UNAVAILABLE_HINT = "the call was not stored; retry later with the same message id";
/** One publish waits at most this long before it is sent again (same message id). */
const ATTEMPT_TIMEOUT_MS = 2_000;
const RETRY_MAX_BACKOFF_MS = 500;
/** The connection was down when publishing, or dropped before JetStream answered. */
const disconnected = () =>
  new HookpostError(Code.UNAVAILABLE, `lost the NATS connection: ${UNAVAILABLE_HINT}`);

/**
 * Persists calls on the EVENTS stream and resolves only once JetStream confirmed them.
 * Connected to a lone server that is down, it fails at once with UNAVAILABLE instead of
 * letting callers wait out a timeout (retrying is safe: the message id deduplicates). In a
 * cluster, a dropped connection or a stream leader election is ridden out within the publish
 * deadline. It recovers on its own when the connection comes back.
 */
export class EventPublisher {
  /** All publishes in flight share one inbox; a batch's go out in one socket write. */
  readonly #pipe: PipelinedPublisher;
  readonly #options: PublisherOptions;
  readonly #log: Logger;
  readonly #state: ConnectionState;

  constructor(nc: NatsConnection, log: Logger, options: PublisherOptions) {
    this.#pipe = new PipelinedPublisher(nc, options.timeoutMs);
    this.#log = log;
    this.#options = options;
    this.#state = new ConnectionState(nc);
    this.#state.onChange((up) => {
      if (!up) this.#pipe.failAll(new PublishError("DISCONNECT", "lost the NATS connection"));
    });
  }

  get connected(): boolean {
    return this.#state.connected;
  }

  /** Called with false when the connection drops and true when it is back. */
  onStatus(fn: (connected: boolean) => void): void {
    this.#state.onChange(fn);
  }

  /**
   * Stores one call; resolves when JetStream confirmed it (or already had it). A transient
   * failure (a stream leader election, a move to another cluster member) is retried with the
   * same Nats-Msg-Id, so the call is stored once, until the publish deadline (timeoutMs) runs
   * out; only then is the answer UNAVAILABLE. A lone server that is unreachable fails at once.
   * `trace`: the caller's trace context (gRPC metadata / HTTP headers), carried on in the NATS
   * headers. Resolves with the bytes the stream counts for it and its sequence (for the
   * per-source quota).
   */
  async publish(call: StoredCall, trace?: TraceContext): Promise<Published> {
    const started = performance.now();
    const deadline = started + this.#options.timeoutMs;
    const subject = eventSubject(call.sourceId, call.type);
    // Tracing hook: one span per call, ended with the publish outcome; injected below.
    const span = startPublishSpan(call, subject, trace);
    const observe = (outcome: PublishOutcome) => {
      this.#options.onPublished?.(call.type, outcome, performance.now() - started);
      span.end(outcome, outcome !== "stored" && outcome !== "duplicate");
    };
    const h = headers();
    const msgId = `${call.sourceId}:${call.messageId}`;
    h.set("Nats-Msg-Id", msgId);
    span.inject(h); // tracing hook: traceparent/tracestate on EVENTS
    const data = JSON.stringify(call);
    for (let attempt = 1; ; attempt++) {
      try {
        const ack = await this.#attempt(subject, data, h, deadline - performance.now());
        observe(ack.duplicate ? "duplicate" : "stored");
        return ack.duplicate
          ? { bytes: 0, seq: 0 }
          : { bytes: data.length + subject.length + msgId.length + STORE_OVERHEAD_BYTES, seq: ack.seq };
      } catch (err) {
        const retry = await this.#retryable(err, attempt, deadline);
        if (retry) continue;
        const herr = this.#toError(err);
        observe(
          herr.code === Code.RESOURCE_EXHAUSTED
            ? "full"
            : herr.code === Code.UNAVAILABLE
              ? "unavailable"
              : "error",
        );
        throw herr;
      }
    }
  }

  /** After a backoff (and a reconnect, in a cluster): true when another attempt fits the deadline. */
  async #retryable(err: unknown, attempt: number, deadline: number): Promise<boolean> {
    const lostConnection = err instanceof HookpostError || !this.connected;
    if (lostConnection ? !this.#state.clustered : !isTransient(err)) return false;
    const backoff = Math.min(RETRY_MAX_BACKOFF_MS, 25 * 2 ** attempt) * (0.5 + Math.random() / 2);
    if (deadline - performance.now() <= backoff) return false;
    await sleep(backoff);
    return this.#state.waitUp(deadline - performance.now());
  }

  /** One publish; fails at once when the connection is (or goes) down meanwhile (failAll). */
  #attempt(subject: string, data: string, h: MsgHdrs, remainingMs: number): Promise<PubAckLite> {
    if (!this.connected) return Promise.reject(disconnected());
    // Short enough that a publish lost in an election is sent again well before the deadline.
    return this.#pipe.publish(subject, data, h, Math.max(1, Math.min(remainingMs, ATTEMPT_TIMEOUT_MS)));
  }

  /**
   * Stores several calls at once (at most `concurrency` in flight); rejects with the first
   * failure. Resolves with the bytes stored and the highest sequence.
   */
  async publishAll(
    calls: readonly StoredCall[],
    concurrency: number,
    trace?: TraceContext,
  ): Promise<Published> {
    let next = 0;
    let bytes = 0;
    let seq = 0;
    let failed: unknown;
    const worker = async () => {
      while (failed === undefined && next < calls.length) {
        const call = calls[next++]!;
        try {
          const p = await this.publish(call, trace);
          bytes += p.bytes;
          seq = Math.max(seq, p.seq);
        } catch (err) {
          failed ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, calls.length) }, worker));
    if (failed !== undefined) throw failed;
    return { bytes, seq };
  }

  #toError(err: unknown): HookpostError {
    if (err instanceof HookpostError) return err;
    const e = err as {
      code?: string;
      message?: string;
      api_error?: { err_code?: number; description?: string };
    };
    const api = e?.api_error;
    if (countIfFull(EVENTS_STREAM, err)) {
      this.#log.warn({ err: api?.description ?? e?.message }, "EVENTS stream is full; refusing calls");
      return new HookpostError(
        Code.RESOURCE_EXHAUSTED,
        "the event stream is full: the call was not stored; retry later (older calls are kept until delivered)",
        [],
        { retryAfterMs: STREAM_FULL_RETRY_AFTER_MS },
      );
    }
    if (isNoResponders(err)) {
      return new HookpostError(Code.UNAVAILABLE, `JetStream is not available: ${UNAVAILABLE_HINT}`);
    }
    if (e?.code === "TIMEOUT") {
      // The last attempt timed out: the deadline is what the client waited for.
      return new HookpostError(
        Code.UNAVAILABLE,
        `JetStream did not confirm the call within ${this.#options.timeoutMs} ms: ${UNAVAILABLE_HINT}`,
      );
    }
    if (e?.code === "DISCONNECT" || e?.code === "CONNECTION_CLOSED" || e?.code === "CONNECTION_DRAINING") {
      return new HookpostError(Code.UNAVAILABLE, `lost the NATS connection: ${UNAVAILABLE_HINT}`);
    }
    // Anything else (an unexpected JetStream error): the call may or may not be stored, and a
    // retry with the same message id is safe, so tell the client to retry.
    this.#log.error({ err: e?.message, apiError: api }, "unexpected JetStream publish error");
    return new HookpostError(
      Code.UNAVAILABLE,
      `JetStream refused the call (${e?.message ?? "unknown error"}): ${UNAVAILABLE_HINT}`,
    );
  }
}
