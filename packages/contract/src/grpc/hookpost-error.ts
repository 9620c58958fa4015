import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Any, anyPack, anyUnpack } from "@bufbuild/protobuf/wkt";
import { status as Code, Metadata, type ServiceError } from "@grpc/grpc-js";
import { BadRequestSchema, RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";

export { Code };

/** One invalid field of a request, as in google.rpc.BadRequest (`calls[3].event`). */
export interface FieldViolation {
  field: string;
  description: string;
}

const DETAILS_KEY = "grpc-status-details-bin";

/**
 * The one error type of Hookpost's gRPC surface: a status code, a message a person can read,
 * and, for INVALID_ARGUMENT, the fields at fault. Servers throw it; clients receive it.
 */
export class HookpostError extends Error {
  override readonly name = "HookpostError";
  readonly code: Code;
  readonly fieldViolations: readonly FieldViolation[];
  /**
   * When the client may try again (a quota, a full stream): google.rpc.RetryInfo over gRPC,
   * `Retry-After` over HTTP.
   */
  readonly retryAfterMs: number | undefined;

  constructor(
    code: Code,
    message: string,
    fieldViolations: readonly FieldViolation[] = [],
    options?: ErrorOptions & { retryAfterMs?: number },
  ) {
    super(message, options);
    this.code = code;
    this.fieldViolations = fieldViolations;
    this.retryAfterMs = options?.retryAfterMs;
  }

  /** INVALID_ARGUMENT naming the fields at fault; the message lists them for people. */
  static invalid(violations: readonly FieldViolation[]): HookpostError {
    const text = violations.map((v) => `${v.field}: ${v.description}`).join("; ");
    return new HookpostError(Code.INVALID_ARGUMENT, `invalid request: ${text}`, violations);
  }

  get codeName(): string {
    return Code[this.code] ?? String(this.code);
  }

  /** The grpc-js error object a server handler passes to its callback. */
  toServiceError(): Partial<ServiceError> {
    const metadata = new Metadata();
    const packed: Any[] = [];
    if (this.fieldViolations.length > 0) {
      packed.push(
        anyPack(
          BadRequestSchema,
          create(BadRequestSchema, { fieldViolations: this.fieldViolations.map((v) => ({ ...v })) }),
        ),
      );
    }
    if (this.retryAfterMs !== undefined) {
      const ms = Math.max(0, Math.ceil(this.retryAfterMs));
      const retryDelay = { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
      packed.push(anyPack(RetryInfoSchema, create(RetryInfoSchema, { retryDelay })));
    }
    if (packed.length > 0) {
      const details = create(StatusSchema, { code: this.code, message: this.message, details: packed });
      metadata.set(DETAILS_KEY, Buffer.from(toBinary(StatusSchema, details)));
    }
    return { code: this.code, details: this.message, metadata };
  }

  /** Turns any error a grpc-js client call produced into a HookpostError. */
  static fromServiceError(err: unknown): HookpostError {
    if (err instanceof HookpostError) return err;
    const e = err as Partial<ServiceError>;
    if (typeof e?.code !== "number") {
      return new HookpostError(Code.UNKNOWN, err instanceof Error ? err.message : String(err), [], {
        cause: err,
      });
    }
    const violations: FieldViolation[] = [];
    let retryAfterMs: number | undefined;
    const raw = e.metadata?.get(DETAILS_KEY)[0];
    if (raw instanceof Buffer) {
      try {
        const st = fromBinary(StatusSchema, raw);
        for (const any of st.details) {
          const br = anyUnpack(any, BadRequestSchema);
          if (br)
            violations.push(
              ...br.fieldViolations.map((v) => ({ field: v.field, description: v.description })),
            );
          const ri = anyUnpack(any, RetryInfoSchema);
          if (ri?.retryDelay) {
            retryAfterMs = Number(ri.retryDelay.seconds) * 1000 + Math.round(ri.retryDelay.nanos / 1e6);
          }
        }
      } catch {
        // Undecodable details: keep the code and message.
      }
    }
    return new HookpostError(e.code, e.details ?? e.message ?? "", violations, {
      cause: err,
      ...(retryAfterMs !== undefined && { retryAfterMs }),
    });
  }
}
