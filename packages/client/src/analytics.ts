import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type { JsonObject } from "@bufbuild/protobuf";
import {
  Code,
  clientSetting,
  DEFAULT_MAX_BATCH_CALLS,
  type HookpostError,
  MAX_BATCH_BYTES,
} from "@hookpost/contract";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import type { Callback } from "./analytics-error.js";
import { AnalyticsError } from "./analytics-error.js";
import { Batcher } from "./batcher.js";
import type {
  AliasParams,
  CallType,
  GroupParams,
  IdentifyParams,
  PageParams,
  ParamsByType,
  ScreenParams,
  TrackParams,
} from "./calls.js";
import { createDebug, type DebugLog } from "./debug.js";
import { decodeCall } from "./decode.js";
import { deliverBatch, type FailedGroup, type RetryPolicy } from "./delivery.js";
import { encodeCall } from "./encode.js";
import { type ClientOptions, createClient, writeKeyMetadata } from "./grpc/client.js";
import { LIBRARY } from "./library.js";
import {
  type AnalyticsOptions,
  checkDelay,
  checkNumber,
  DEFAULT_CHANNEL_OPTIONS,
  DEFAULT_ENDPOINT,
  DEFAULTS,
} from "./options.js";
import type { QueuedCall } from "./queue.js";
import { validateCall } from "./validate.js";

/** The contract's limit is 500 KiB per BatchRequest; we stay strictly under it. */
const BATCH_BYTES = MAX_BATCH_BYTES - 1;

export type AnalyticsEvents = {
  /** Calls the server did not store, and why (`err.calls`, `err.code`, `err.grpcCode`). */
  error: [err: AnalyticsError];
};

export interface CloseOptions {
  /** Give up on what is still unsent after this long (reported as failed). Default 10 000 ms. */
  timeoutMs?: number;
}

const connectIngest = (target: string, options: ClientOptions) =>
  createClient(IngestService, target, options);

type Connection = { rpc: ReturnType<typeof connectIngest>; active: number; retired: boolean };

/**
 * Records analytics calls and sends them to Hookpost's ingest service in batches, in the
 * background (the Go v2 library's model): no call makes a request of its own.
 *
 * Failures are never silent: a call that breaks a rule, is too large, finds the queue full
 * (`maxQueueSize`) or comes after close() throws an AnalyticsError at once; calls the server did
 * not store are reported by the `error` event and each call's callback. Without an `error`
 * listener they are written to stderr rather than crashing the process, as an unhandled
 * EventEmitter error would.
 */
export class Analytics extends EventEmitter<AnalyticsEvents> {
  private readonly writeKey: string;
  private readonly batcher: Batcher;
  private readonly log: DebugLog;
  private readonly library: JsonObject = { name: LIBRARY.name, version: LIBRARY.version };
  private readonly maxQueueSize: number;
  private readonly policy: RetryPolicy;
  private readonly timeoutMs: number;
  private readonly clientOptions: Pick<AnalyticsOptions, "credentials" | "channelOptions">;
  private _endpoint: string;
  private connection: Connection | undefined;
  private closing: Promise<void> | undefined;

  constructor(writeKey: string, options: AnalyticsOptions = {}) {
    super();
    if (typeof writeKey !== "string" || writeKey === "") throw new TypeError("a write key is required");
    this.writeKey = writeKey;
    this._endpoint = checkEndpoint(
      options.endpoint ?? clientSetting("HOOKPOST_ENDPOINT") ?? DEFAULT_ENDPOINT,
    );
    this.log = createDebug("analytics", options.debug);
    this.maxQueueSize = checkNumber("maxQueueSize", options.maxQueueSize ?? DEFAULTS.maxQueueSize, 1);
    this.timeoutMs = checkDelay("timeoutMs", options.timeoutMs ?? DEFAULTS.timeoutMs, 1);
    this.policy = {
      maxRetries: checkNumber("maxRetries", options.maxRetries ?? DEFAULTS.maxRetries, 0),
      retryInitialDelayMs: checkDelay(
        "retryInitialDelayMs",
        options.retryInitialDelayMs ?? DEFAULTS.retryInitialDelayMs,
        0,
      ),
      retryMaxDelayMs: checkDelay("retryMaxDelayMs", options.retryMaxDelayMs ?? DEFAULTS.retryMaxDelayMs, 0),
    };
    this.clientOptions = {};
    if (options.credentials) this.clientOptions.credentials = options.credentials;
    if (options.channelOptions) this.clientOptions.channelOptions = options.channelOptions;
    this.batcher = new Batcher({
      flushAt: checkNumber("flushAt", options.flushAt ?? options.size ?? DEFAULTS.flushAt, 1),
      flushAfter: checkDelay("flushAfter", options.flushAfter ?? DEFAULTS.flushAfter, 0, false),
      maxInFlight: checkNumber("maxInFlight", options.maxInFlight ?? DEFAULTS.maxInFlight, 1),
      maxBatchBytes: BATCH_BYTES,
      maxBatchCalls: DEFAULT_MAX_BATCH_CALLS,
      deliver: (calls, signal) => this.deliver(calls, signal),
      log: this.log,
    });
    this.log("client for %s (flushAt %d, flushAfter %d ms)", this._endpoint, this.flushAt, this.flushAfter);
  }

  /** gRPC target of the ingest service; a change applies to the next batch sent. */
  get endpoint(): string {
    return this._endpoint;
  }

  set endpoint(target: string) {
    target = checkEndpoint(target);
    if (target === this._endpoint) return;
    this._endpoint = target;
    this.retireConnection();
  }

  get flushAt(): number {
    return this.batcher.flushAt;
  }

  set flushAt(n: number) {
    this.batcher.flushAt = checkNumber("flushAt", n, 1);
  }

  /** The Go library's name for `flushAt`. */
  get size(): number {
    return this.flushAt;
  }

  set size(n: number) {
    this.flushAt = n;
  }

  get flushAfter(): number {
    return this.batcher.flushAfter;
  }

  set flushAfter(ms: number) {
    this.batcher.flushAfter = checkDelay("flushAfter", ms, 0, false);
  }

  /** Calls waiting to be sent (not counting batches in flight). */
  get queued(): number {
    return this.batcher.queued;
  }

  /** True once close() was called; further calls throw. */
  get closed(): boolean {
    return this.closing !== undefined;
  }

  /** Queues an identify call; returns its message id. */
  identify(params: IdentifyParams, callback?: Callback): string {
    return this.enqueue("identify", params, callback);
  }

  track(params: TrackParams, callback?: Callback): string {
    return this.enqueue("track", params, callback);
  }

  page(params: PageParams, callback?: Callback): string {
    return this.enqueue("page", params, callback);
  }

  screen(params: ScreenParams, callback?: Callback): string {
    return this.enqueue("screen", params, callback);
  }

  group(params: GroupParams, callback?: Callback): string {
    return this.enqueue("group", params, callback);
  }

  alias(params: AliasParams, callback?: Callback): string {
    return this.enqueue("alias", params, callback);
  }

  /** Sends everything queued; resolves once each of those calls was stored or reported. */
  flush(): Promise<void> {
    return this.batcher.flush();
  }

  /**
   * Refuses new calls, sends everything queued, waits for it (retries included) and releases the
   * connection. After `timeoutMs`, what is still unsent is reported as failed and it resolves.
   */
  close(options: CloseOptions = {}): Promise<void> {
    if (this.closing) return this.closing;
    const timeoutMs = checkDelay("timeoutMs", options.timeoutMs ?? DEFAULTS.closeTimeoutMs, 0, false);
    this.log("closing (%d queued, %d batches in flight)", this.queued, this.batcher.batchesInFlight);
    this.closing = this.drain(timeoutMs);
    return this.closing;
  }

  private async drain(timeoutMs: number): Promise<void> {
    const drained = this.batcher.flush();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<true>((resolve) => {
      timer = setTimeout(() => resolve(true), timeoutMs);
    });
    const late = await Promise.race([drained.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) {
      const stranded = this.batcher.abort();
      this.log("close() timed out after %d ms; %d calls never sent", timeoutMs, stranded.length);
      if (stranded.length > 0) {
        this.report(
          stranded,
          new AnalyticsError(
            "delivery_failed",
            `close() timed out after ${timeoutMs} ms; ${stranded.length} queued call(s) were never sent`,
            { calls: stranded.map((c) => decodeCall(c.frame)) },
          ),
        );
      }
      await drained; // in-flight batches were aborted and report themselves
    }
    this.retireConnection();
    this.log("closed");
  }

  private enqueue<T extends CallType>(
    type: T,
    params: ParamsByType[T],
    callback: Callback | undefined,
  ): string {
    if (this.closing) throw new AnalyticsError("closed", `${type} called after close()`);
    if (callback !== undefined && typeof callback !== "function") {
      throw new TypeError(`${type}: the callback must be a function`);
    }
    validateCall(type, params);
    if (this.batcher.queued >= this.maxQueueSize) {
      throw new AnalyticsError(
        "queue_full",
        `${type} refused: ${this.maxQueueSize} calls are already queued (maxQueueSize); the server is not keeping up or unreachable`,
      );
    }
    const messageId = params.messageId || randomUUID();
    const frame = encodeCall(type, params, messageId, this.library, new Date());
    this.batcher.enqueue(frame, callback);
    return messageId;
  }

  private async deliver(calls: QueuedCall[], signal: AbortSignal): Promise<void> {
    const result = await deliverBatch(
      calls,
      async (request, sig) => {
        const conn = this.acquire();
        // The gRPC glue adds an abort listener per call and keeps it; a signal of our own per
        // attempt, linked to the client's, keeps those from piling up on the long-lived one.
        const attempt = new AbortController();
        const cancel = () => attempt.abort();
        sig.addEventListener("abort", cancel, { once: true });
        try {
          return await conn.rpc.batch(request, { signal: attempt.signal, timeoutMs: this.timeoutMs });
        } finally {
          sig.removeEventListener("abort", cancel);
          this.release(conn);
        }
      },
      this.policy,
      signal,
      this.log,
    );
    for (const call of result.delivered) invoke(call.callback, undefined);
    for (const group of result.failed) this.report(group.calls, failure(group));
  }

  /** Emits one error for a group of calls and hands it to each call's callback. */
  private report(calls: readonly QueuedCall[], err: AnalyticsError): void {
    if (this.listenerCount("error") > 0) {
      try {
        this.emit("error", err);
      } catch (thrown) {
        // A throwing listener must not break delivery bookkeeping; surface it as Node would.
        rethrowLater(thrown);
      }
    } else {
      process.stderr.write(`hookpost analytics: ${err.message} (no 'error' listener)\n`);
    }
    for (const call of calls) invoke(call.callback, err);
  }

  private acquire(): Connection {
    if (!this.connection) {
      this.log("connecting to %s", this._endpoint);
      this.connection = {
        rpc: connectIngest(this._endpoint, {
          ...this.clientOptions,
          metadata: writeKeyMetadata(this.writeKey),
          channelOptions: { ...DEFAULT_CHANNEL_OPTIONS, ...this.clientOptions.channelOptions },
        }),
        active: 0,
        retired: false,
      };
    }
    this.connection.active++;
    return this.connection;
  }

  private release(conn: Connection): void {
    conn.active--;
    if (conn.retired && conn.active === 0) conn.rpc.close();
  }

  /** Closes the current channel once its in-flight RPCs are done; the next batch opens a new one. */
  private retireConnection(): void {
    const conn = this.connection;
    this.connection = undefined;
    if (!conn) return;
    conn.retired = true;
    if (conn.active === 0) conn.rpc.close();
  }
}

function failure(group: FailedGroup): AnalyticsError {
  const { calls, error, attempts } = group;
  const refused = error.code === Code.INVALID_ARGUMENT;
  return new AnalyticsError(
    refused ? "invalid_call" : "delivery_failed",
    `${calls.length} call(s) not stored after ${attempts} attempt(s): ${describe(error)}`,
    { calls: calls.map((c) => decodeCall(c.frame)), grpcCode: error.code, cause: error },
  );
}

function describe(error: HookpostError): string {
  return `${error.codeName}: ${error.message}`;
}

function checkEndpoint(target: unknown): string {
  if (typeof target !== "string" || target.trim() === "")
    throw new TypeError("endpoint must be a gRPC target");
  return target.trim();
}

/** User callbacks run outside our bookkeeping; a throw surfaces like any callback throw in Node. */
function invoke(callback: Callback | undefined, err: AnalyticsError | undefined): void {
  if (!callback) return;
  try {
    if (err) callback(err);
    else callback();
  } catch (thrown) {
    rethrowLater(thrown);
  }
}

function rethrowLater(thrown: unknown): void {
  process.nextTick(() => {
    throw thrown;
  });
}
