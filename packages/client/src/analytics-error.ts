import type { Code } from "@hookpost/contract";
import type { Call } from "./calls.js";

/**
 * Why a call was refused or lost.
 * - `invalid_call`: breaks a rule of the contract (thrown at enqueue; or, rarely, refused by the server).
 * - `call_too_large`: one call encodes to more than 32 KiB (thrown at enqueue).
 * - `queue_full`: `maxQueueSize` calls are already waiting (thrown at enqueue).
 * - `closed`: the client was closed (thrown at enqueue).
 * - `delivery_failed`: the server did not store the calls (event + callbacks).
 */
export type AnalyticsErrorCode =
  | "invalid_call"
  | "call_too_large"
  | "queue_full"
  | "closed"
  | "delivery_failed";

export interface AnalyticsErrorDetails {
  calls?: readonly Call[];
  field?: string;
  grpcCode?: Code;
  cause?: unknown;
}

/** The one error type of the client: thrown at enqueue, emitted as `error`, and passed to callbacks. */
export class AnalyticsError extends Error {
  override readonly name = "AnalyticsError";
  readonly code: AnalyticsErrorCode;
  /** The calls this error is about; empty for calls refused at enqueue (they were never queued). */
  readonly calls: readonly Call[];
  /** For `invalid_call`: the field at fault, e.g. `event` or `properties.price`. */
  readonly field: string | undefined;
  /** For `delivery_failed`: the gRPC status of the last attempt (a grpc-js `status` value). */
  readonly grpcCode: Code | undefined;

  constructor(code: AnalyticsErrorCode, message: string, details: AnalyticsErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.calls = details.calls ?? [];
    this.field = details.field;
    this.grpcCode = details.grpcCode;
  }
}

/** Called once per call: without an argument when the server stored it, with the error otherwise. */
export type Callback = (err?: AnalyticsError) => void;
