import { headers, type NatsConnection } from "nats";
import { Code, HookpostError } from "../../../lib/grpc/mod.js";
import type { Logger } from "../../../lib/log/logger.js";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import { ConnectionState } from "../../../lib/nats/connection-state.js";
import { isStreamFull } from "../../../lib/nats/jetstream-errors.js";
import { PipelinedPublisher, PublishError } from "../../../lib/nats/pipelined-publisher.js";
import { eventSubject } from "../../../lib/nats/topology.js";

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

  /** Stores one call; resolves when JetStream confirmed it (or already had it). */
  async publish(call: StoredCall): Promise<void> {
    const started = performance.now();
    const observe = (outcome: PublishOutcome) =>
      this.#options.onPublished?.(call.type, outcome, performance.now() - started);
    if (!this.connected) {
      observe("unavailable");
      throw new HookpostError(Code.UNAVAILABLE, `NATS JetStream is unreachable: ${UNAVAILABLE_HINT}`);
    }
    const h = headers();
    h.set("Nats-Msg-Id", `${call.sourceId}:${call.messageId}`);
    try {
      // Fails at once when the connection drops meanwhile (failAll above).
      const ack = await this.#pipe.publish(eventSubject(call.sourceId, call.type), JSON.stringify(call), h);
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
    }
  }

  /** Stores several calls at once (at most `concurrency` in flight); rejects with the first failure. */
  async publishAll(calls: readonly StoredCall[], concurrency: number): Promise<void> {
    let next = 0;
    let failed: unknown;
    const worker = async () => {
      while (failed === undefined && next < calls.length) {
        const call = calls[next++]!;
        try {
          await this.publish(call);
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
