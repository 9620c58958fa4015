import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { anyPack, anyUnpack } from "@bufbuild/protobuf/wkt";
import { status as Code, Metadata, type ServiceError } from "@grpc/grpc-js";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";

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

  constructor(
    code: Code,
    message: string,
    fieldViolations: readonly FieldViolation[] = [],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.code = code;
    this.fieldViolations = fieldViolations;
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
    if (this.fieldViolations.length > 0) {
      const details = create(StatusSchema, {
        code: this.code,
        message: this.message,
        details: [
          anyPack(
            BadRequestSchema,
            create(BadRequestSchema, { fieldViolations: this.fieldViolations.map((v) => ({ ...v })) }),
          ),
        ],
      });
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
        }
      } catch {
        // Undecodable details: keep the code and message.
      }
    }
    return new HookpostError(e.code, e.details ?? e.message ?? "", violations, { cause: err });
  }
}
