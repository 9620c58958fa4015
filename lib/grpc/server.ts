import { create, fromBinary, type MessageInitShape, type MessageShape, toBinary } from "@bufbuild/protobuf";
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
import { Code, HookpostError } from "./hookpost-error.js";
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
export type ClientStreamingHandler<M extends Method> = (
  reqs: AsyncIterable<MessageShape<M["input"]>>,
  ctx: CallContext,
) => Promise<Output<M>>;

/** An implementation of a service from its protobuf-es descriptor; missing methods answer UNIMPLEMENTED. */
export type ServiceImpl<S extends GenServiceMethods> = {
  [K in keyof S]?: S[K]["methodKind"] extends "unary"
    ? UnaryHandler<S[K]>
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
    const decode = (bytes: Buffer): MessageShape<typeof method.input> => {
      let decoded: MessageShape<typeof method.input>;
      try {
        decoded = fromBinary(method.input, bytes);
      } catch (err) {
        throw new HookpostError(
          Code.INVALID_ARGUMENT,
          `request is not a valid ${method.input.typeName}: ${(err as Error).message}`,
        );
      }
      // Refused rather than silently lost by the decoder (see proto-map-keys.ts).
      const lost = lostMapKeys(method.input, bytes);
      if (lost.length > 0) {
        throw HookpostError.invalid(
          lost.map((field) => ({
            field,
            description: `"${LOST_MAP_KEY}" is not accepted as a key (it cannot be stored faithfully)`,
          })),
        );
      }
      return decoded;
    };
    const encode = (out: unknown): Buffer =>
      Buffer.from(
        toBinary(method.output, create(method.output, out as MessageInitShape<typeof method.output>)),
      );
    const fn = (impl as Record<string, unknown>)[method.localName] as
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
      const abort = new AbortController();
      let answered = false;
      // grpc-js also signals "cancelled" once an answered call's stream closes: only a call
      // still running is really cancelled (and an error with its stack trace is not free).
      call.on("cancelled", () => {
        if (!answered) abort.abort(new HookpostError(Code.CANCELLED, "call cancelled"));
      });
      const ctx: CallContext = {
        method: name,
        metadata: call.metadata,
        peer: call.getPeer(),
        signal: abort.signal,
      };
      let code: Code = Code.OK;
      try {
        if (!fn) throw new HookpostError(Code.UNIMPLEMENTED, `${name} is not implemented yet`);
        const out = await run(ctx);
        answered = true;
        callback(null, encode(out));
      } catch (err) {
        const herr = err instanceof HookpostError ? err : internal(name, err, options);
        code = herr.code;
        answered = true;
        callback(herr.toServiceError());
      } finally {
        options.onCallEnd?.(name, code, performance.now() - started);
      }
    };

    if (method.methodKind === "unary") {
      const unary: handleUnaryCall<Buffer, Buffer> = (call, callback) => {
        void finish(call, (ctx) => fn!(decode(call.request), ctx), callback);
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

/** An unexpected failure: reported through onInternalError, answered as a bare INTERNAL. */
export function internal(method: string, err: unknown, options: ServeOptions): HookpostError {
  options.onInternalError?.(method, err);
  return new HookpostError(Code.INTERNAL, "internal error", [], { cause: err });
}
