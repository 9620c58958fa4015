import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type {
  handleClientStreamingCall,
  handleUnaryCall,
  Metadata,
  Server,
  ServerReadableStream,
  ServerUnaryCall,
  ServiceDefinition,
  ServiceError,
} from "@grpc/grpc-js";
import { Code, HookpostError } from "@hookpost/contract";
import { toHookpostError } from "./domain-status.js";
import { LOST_MAP_KEY, lostMapKeys } from "./proto-map-keys.js";

/** What a handler knows about the call besides the request. */
export interface CallContext {
  /** `Service/Method`, for logs and metrics. */
  readonly method: string;
  readonly metadata: Metadata;
  readonly peer: string;
  /** Aborted when the client cancels or the deadline passes. */
  readonly signal: AbortSignal;
}

type Method = GenServiceMethods[string];
type Output<M extends Method> = MessageInitShape<M["output"]>;

export type UnaryHandler<M extends Method> = (
  req: MessageShape<M["input"]>,
  ctx: CallContext,
) => Promise<Output<M>>;
/**
 * A unary request as it arrived: its bytes, and the standard decoding (INVALID_ARGUMENT for
 * bytes that are not the message, refusal of map keys the decoder would lose), for a handler
 * that reads the bytes itself when it can (see `rawHandler`).
 */
export interface RawRequest<M extends Method> {
  readonly bytes: Buffer;
  decode(): MessageShape<M["input"]>;
}
/** The response of a raw handler: the message, or its encoding (a hot path encoding it itself). */
export type RawOutput<M extends Method> = Output<M> | Uint8Array;

/** A unary handler that takes the request undecoded (a hot path with its own reader). */
export interface RawUnaryHandler<M extends Method> {
  readonly raw: (req: RawRequest<M>, ctx: CallContext) => Promise<RawOutput<M>>;
}

export function rawHandler<M extends Method>(
  fn: (req: RawRequest<M>, ctx: CallContext) => Promise<RawOutput<M>>,
): RawUnaryHandler<M> {
  return { raw: fn };
}

export type ClientStreamingHandler<M extends Method> = (
  reqs: AsyncIterable<MessageShape<M["input"]>>,
  ctx: CallContext,
) => Promise<Output<M>>;

/** An implementation of a service from its protobuf-es descriptor; missing methods answer UNIMPLEMENTED. */
export type ServiceImpl<S extends GenServiceMethods> = {
  [K in keyof S]?: S[K]["methodKind"] extends "unary"
    ? UnaryHandler<S[K]> | RawUnaryHandler<S[K]>
    : S[K]["methodKind"] extends "client_streaming"
      ? ClientStreamingHandler<S[K]>
      : never;
};

export interface ServeOptions {
  /** Called once per finished call with the status code sent. */
  onCallEnd?: (method: string, code: Code, durationMs: number) => void;
  /** Called with unexpected (non-HookpostError) failures; the client only sees INTERNAL. */
  onInternalError?: (method: string, err: unknown) => void;
}

const identity = (b: Buffer) => b;
const passThrough = (b: Buffer) => b;

/**
 * Registers a protobuf-es service on a grpc-js server. Requests are decoded inside the
 * handler so that garbage bytes answer INVALID_ARGUMENT instead of grpc-js's INTERNAL.
 */
export function addService<S extends GenServiceMethods>(
  server: Server,
  service: GenService<S>,
  impl: ServiceImpl<S>,
  options: ServeOptions = {},
): void {
  const definition: Record<string, ServiceDefinition[string]> = {};
  const handlers: Record<
    string,
    handleUnaryCall<Buffer, Buffer> | handleClientStreamingCall<Buffer, Buffer>
  > = {};
  for (const method of service.methods) {
    const name = `${service.name}/${method.name}`;
    const decode = (bytes: Buffer): MessageShape<typeof method.input> => decodeRequest(method.input, bytes);
    const encode = (out: unknown): Buffer =>
      out instanceof Uint8Array
        ? Buffer.from(out.buffer, out.byteOffset, out.length)
        : Buffer.from(
            toBinary(method.output, create(method.output, out as MessageInitShape<typeof method.output>)),
          );
    const handler = (impl as Record<string, unknown>)[method.localName] as
      | ((req: unknown, ctx: CallContext) => Promise<unknown>)
      | RawUnaryHandler<Method>
      | undefined;
    const raw = typeof handler === "object";
    const fn = (raw ? handler.raw : handler) as
      | ((req: unknown, ctx: CallContext) => Promise<unknown>)
      | undefined;
    const requestStream = method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming";
    const responseStream = method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming";
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream,
      responseStream,
      requestSerialize: passThrough,
      requestDeserialize: identity,
      responseSerialize: passThrough,
      responseDeserialize: identity,
      originalName: method.localName,
    };

    const finish = async (
      call: ServerUnaryCall<Buffer, Buffer> | ServerReadableStream<Buffer, Buffer>,
      run: (ctx: CallContext) => Promise<unknown>,
      callback: (err: Partial<ServiceError> | null, value?: Buffer) => void,
    ) => {
      const started = performance.now();
      // The signal and the peer are made when a handler asks (most calls never do).
      let abort: AbortController | undefined;
      let cancelled = false;
      let answered = false;
      // grpc-js also signals "cancelled" once an answered call's stream closes: only a call
      // still running is really cancelled (and an error with its stack trace is not free).
      call.on("cancelled", () => {
        if (answered || cancelled) return;
        cancelled = true;
        abort?.abort(new HookpostError(Code.CANCELLED, "call cancelled"));
      });
      const ctx: CallContext = {
        method: name,
        metadata: call.metadata,
        get peer() {
          return call.getPeer();
        },
        get signal() {
          if (abort === undefined) {
            abort = new AbortController();
            if (cancelled) abort.abort(new HookpostError(Code.CANCELLED, "call cancelled"));
          }
          return abort.signal;
        },
      };
      let code: Code = Code.OK;
      try {
        if (!fn) throw new HookpostError(Code.UNIMPLEMENTED, `${name} is not implemented yet`);
        const out = await run(ctx);
        answered = true;
        callback(null, encode(out));
      } catch (err) {
        const herr = toHookpostError(err) ?? internal(name, err, options);
        code = herr.code;
        answered = true;
        callback(herr.toServiceError());
      } finally {
        options.onCallEnd?.(name, code, performance.now() - started);
      }
    };

    if (method.methodKind === "unary") {
      const unary: handleUnaryCall<Buffer, Buffer> = (call, callback) => {
        const bytes = call.request;
        void finish(
          call,
          (ctx) => fn!(raw ? { bytes, decode: () => decode(bytes) } : decode(bytes), ctx),
          callback,
        );
      };
      handlers[method.localName] = unary;
    } else if (method.methodKind === "client_streaming") {
      handlers[method.localName] = ((call: ServerReadableStream<Buffer, Buffer>, callback) => {
        async function* messages() {
          for await (const chunk of call as AsyncIterable<Buffer>) yield decode(chunk);
        }
        void finish(call, (ctx) => fn!(messages(), ctx), callback);
      }) as handleClientStreamingCall<Buffer, Buffer>;
    } else {
      throw new Error(`${name}: ${method.methodKind} methods are not supported`);
    }
  }
  server.addService(definition as ServiceDefinition, handlers);
}

/**
 * A request's protobuf bytes decoded: INVALID_ARGUMENT for bytes that are not the message, and
 * for map keys the decoder would lose (proto-map-keys.ts). gRPC and Connect (binary) alike.
 */
export function decodeRequest<D extends DescMessage>(desc: D, bytes: Uint8Array): MessageShape<D> {
  let decoded: MessageShape<D>;
  let lost: string[];
  try {
    decoded = fromBinary(desc, bytes);
    // Refused rather than silently lost by the decoder (see proto-map-keys.ts). Its
    // stricter reader fails on some malformed bytes the decoder tolerates: refused too.
    lost = lostMapKeys(desc, bytes);
  } catch (err) {
    throw new HookpostError(
      Code.INVALID_ARGUMENT,
      `request is not a valid ${desc.typeName}: ${(err as Error).message}`,
    );
  }
  if (lost.length > 0) {
    throw HookpostError.invalid(
      lost.map((field) => ({
        field,
        description: `"${LOST_MAP_KEY}" is not accepted as a key (it cannot be stored faithfully)`,
      })),
    );
  }
  return decoded;
}

/** An unexpected failure: reported through onInternalError, answered as a bare INTERNAL. */
export function internal(method: string, err: unknown, options: ServeOptions): HookpostError {
  options.onInternalError?.(method, err);
  return new HookpostError(Code.INTERNAL, "internal error", [], { cause: err });
}
