import { setMaxListeners } from "node:events";
import { headers, type JetStreamClient, type NatsConnection } from "nats";
import { Code, HookpostError } from "../../../lib/grpc/mod.js";
import type { Logger } from "../../../lib/log/logger.js";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import { ConnectionState } from "../../../lib/nats/connection-state.js";
import { isStreamFull } from "../../../lib/nats/jetstream-errors.js";
import { eventSubject } from "../../../lib/nats/topology.js";
import { startPublishSpan, type TraceContext } from "../../../lib/tracing/mod.js";

export interface PublisherOptions {
  /** How long JetStream has to confirm one call. */
  timeoutMs: number;
  /** Observes each publish (for metrics). */
  onPublished?: (type: StoredCall["type"], outcome: PublishOutcome, ms: number) => void;
}

export type PublishOutcome = "stored" | "duplicate" | "unavailable" | "full" | "error";

const UNAVAILABLE_HINT = "the call was not stored; retry later with the same message id";

/**
 * Persists calls on the EVENTS stream and resolves only once JetStream confirmed them.
 * While the NATS connection is down it fails at once with UNAVAILABLE instead of letting
 * callers wait out a timeout; in-flight publishes fail the moment the connection drops
 * (retrying is safe: the message id deduplicates). It recovers on its own when the
 * connection comes back.
 */
export class EventPublisher {
  readonly #js: JetStreamClient;
  readonly #options: PublisherOptions;
  readonly #log: Logger;
  readonly #state: ConnectionState;
  /** Aborted when the connection drops (a fresh one per connection). */
  #lost: AbortController;

  constructor(nc: NatsConnection, log: Logger, options: PublisherOptions) {
    this.#js = nc.jetstream();
    this.#log = log;
    this.#options = options;
    this.#lost = this.#newLost();
    this.#state = new ConnectionState(nc);
    this.#state.onChange((up) => {
      if (up) this.#lost = this.#newLost();
      else this.#lost.abort();
    });
  }

  #newLost(): AbortController {
    const c = new AbortController();
    // One listener per in-flight publish (a batch has hundreds): not a leak.
    setMaxListeners(0, c.signal);
    return c;
  }

  get connected(): boolean {
    return this.#state.connected;
  }

  /** Called with false when the connection drops and true when it is back. */
  onStatus(fn: (connected: boolean) => void): void {
    this.#state.onChange(fn);
  }

  /**
   * Stores one call; resolves when JetStream confirmed it (or already had it). `trace`: the
   * caller's trace context (gRPC metadata / HTTP headers), carried on in the NATS headers.
   */
  async publish(call: StoredCall, trace?: TraceContext): Promise<void> {
    const started = performance.now();
    // Tracing hook: one span per call, ended with the publish outcome; injected below.
    const subject = eventSubject(call.sourceId, call.type);
    const span = startPublishSpan(call, subject, trace);
    const observe = (outcome: PublishOutcome) => {
      this.#options.onPublished?.(call.type, outcome, performance.now() - started);
      span.end(outcome, outcome !== "stored" && outcome !== "duplicate");
    };
    if (!this.connected) {
      observe("unavailable");
      throw new HookpostError(Code.UNAVAILABLE, `NATS JetStream is unreachable: ${UNAVAILABLE_HINT}`);
    }
    const h = headers();
    h.set("Nats-Msg-Id", `${call.sourceId}:${call.messageId}`);
    span.inject(h); // tracing hook: traceparent/tracestate on EVENTS
    const pub = this.#js.publish(subject, JSON.stringify(call), {
      headers: h,
      timeout: this.#options.timeoutMs,
    });
    pub.catch(() => {}); // may lose the race below; its outcome no longer matters then
    // Settles with the publish, or fails at once when the connection drops meanwhile.
    // (Listeners are removed afterwards: racing a never-settling promise would leak.)
    const lost = this.#lost.signal;
    let onLost: (() => void) | undefined;
    const dropped = new Promise<never>((_, reject) => {
      onLost = () =>
        reject(new HookpostError(Code.UNAVAILABLE, `lost the NATS connection: ${UNAVAILABLE_HINT}`));
      if (lost.aborted) onLost();
      else lost.addEventListener("abort", onLost, { once: true });
    });
    dropped.catch(() => {});
    try {
      const ack = await Promise.race([pub, dropped]);
      observe(ack.duplicate ? "duplicate" : "stored");
    } catch (err) {
      const herr = this.#toError(err);
      observe(
        herr.code === Code.RESOURCE_EXHAUSTED
          ? "full"
          : herr.code === Code.UNAVAILABLE
            ? "unavailable"
            : "error",
      );
      throw herr;
    } finally {
      lost.removeEventListener("abort", onLost!);
    }
  }

  /** Stores several calls at once (at most `concurrency` in flight); rejects with the first failure. */
  async publishAll(calls: readonly StoredCall[], concurrency: number, trace?: TraceContext): Promise<void> {
    let next = 0;
    let failed: unknown;
    const worker = async () => {
      while (failed === undefined && next < calls.length) {
        const call = calls[next++]!;
        try {
          await this.publish(call, trace);
        } catch (err) {
          failed ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, calls.length) }, worker));
    if (failed !== undefined) throw failed;
  }

  #toError(err: unknown): HookpostError {
    if (err instanceof HookpostError) return err;
    const e = err as {
      code?: string;
      message?: string;
      api_error?: { err_code?: number; description?: string };
    };
    const api = e?.api_error;
    const text = `${api?.description ?? ""} ${e?.message ?? ""}`;
    if (isStreamFull(err)) {
      this.#log.warn({ err: api?.description ?? e?.message }, "EVENTS stream is full; refusing calls");
      return new HookpostError(
        Code.RESOURCE_EXHAUSTED,
        "the event stream is full: the call was not stored; retry later (older calls are kept until delivered)",
      );
    }
    if (api === undefined && (e?.code === "503" || /no responders/i.test(text))) {
      return new HookpostError(Code.UNAVAILABLE, `JetStream is not available: ${UNAVAILABLE_HINT}`);
    }
    if (e?.code === "TIMEOUT") {
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
