import type { ChannelCredentials } from "@grpc/grpc-js";

export interface AnalyticsOptions {
  /** gRPC target of the ingest service. Default: `HOOKPOST_ENDPOINT`, else `127.0.0.1:50051`. */
  endpoint?: string;
  /** Send a batch once this many calls are queued. Default 20; 1 sends every call at once. */
  flushAt?: number;
  /** Same setting as `flushAt` (the Go library's `Size`); `flushAt` wins when both are given. */
  size?: number;
  /** Send what is queued when this many ms passed since the last batch went out. Default 5000. */
  flushAfter?: number;
  /** Calls that may wait unsent; one more throws `queue_full`. Default 10 000. */
  maxQueueSize?: number;
  /** Batches sent (or waiting to retry) at the same time. Default 4. */
  maxInFlight?: number;
  /** Retries of a batch after UNAVAILABLE, DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED. Default 8. */
  maxRetries?: number;
  /** First retry delay; doubles per retry, with jitter. Default 100 ms. */
  retryInitialDelayMs?: number;
  /** Cap on one retry delay. Default 10 000 ms. */
  retryMaxDelayMs?: number;
  /** Deadline of one Batch RPC. Default 10 000 ms. */
  timeoutMs?: number;
  /** TLS etc.; default plaintext (`credentials.createInsecure()`). */
  credentials?: ChannelCredentials;
  /** grpc-js channel options, merged over ours. */
  channelOptions?: Record<string, string | number>;
  /** Force debug logging on or off; default: `DEBUG` contains `analytics`. */
  debug?: boolean;
}

export const DEFAULT_ENDPOINT = "127.0.0.1:50051";

export const DEFAULTS = {
  flushAt: 20,
  flushAfter: 5000,
  maxQueueSize: 10_000,
  maxInFlight: 4,
  maxRetries: 8,
  retryInitialDelayMs: 100,
  retryMaxDelayMs: 10_000,
  timeoutMs: 10_000,
  closeTimeoutMs: 10_000,
} as const;

/**
 * grpc-js reconnects with a backoff of up to 2 minutes by default; a shorter cap lets our own
 * retries reach a server that came back within seconds.
 */
export const DEFAULT_CHANNEL_OPTIONS: Record<string, number> = {
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 5000,
};

/**
 * The longest delay a Node timer holds. Node runs a longer one (or Infinity) after 1 ms, with a
 * warning: a flushAfter would flush at once, a close() timeout would give up at once.
 */
export const MAX_DELAY_MS = 2_147_483_647;

/** Checks a numeric setting; options are programmer input, so bad values are RangeErrors. */
export function checkNumber(name: string, value: unknown, min: number, integer = true): number {
  if (
    typeof value !== "number" ||
    Number.isNaN(value) ||
    value < min ||
    (integer && !Number.isInteger(value))
  ) {
    throw new RangeError(
      `${name} must be ${integer ? "an integer" : "a number"} >= ${min}, got ${String(value)}`,
    );
  }
  return value;
}

/** Checks a setting in milliseconds: a number from `min` to MAX_DELAY_MS (about 24.8 days). */
export function checkDelay(name: string, value: unknown, min: number, integer = true): number {
  const ms = checkNumber(name, value, min, integer);
  if (ms > MAX_DELAY_MS) {
    throw new RangeError(
      `${name} must be at most ${MAX_DELAY_MS} ms (the longest delay a Node timer holds), got ${String(value)}`,
    );
  }
  return ms;
}
