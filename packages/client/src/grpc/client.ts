import { create, fromBinary, type MessageInitShape, type MessageShape, toBinary } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import {
  type ChannelCredentials,
  Client,
  credentials,
  type CallOptions as GrpcCallOptions,
  Metadata,
  type ServiceError,
} from "@grpc/grpc-js";
import { Code, HookpostError } from "@hookpost/contract";

export interface CallOptions {
  /** Extra metadata for this call (merged over the client's). */
  metadata?: Record<string, string>;
  /** Milliseconds from now. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

type Method = GenServiceMethods[string];
type Input<M extends Method> = MessageInitShape<M["input"]>;
type Output<M extends Method> = MessageShape<M["output"]>;

/** A typed client for a protobuf-es service; every failure rejects with a HookpostError. */
export type ServiceClient<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]["methodKind"] extends "unary"
    ? (req: Input<S[K]>, options?: CallOptions) => Promise<Output<S[K]>>
    : S[K]["methodKind"] extends "client_streaming"
      ? (
          reqs: AsyncIterable<Input<S[K]>> | Iterable<Input<S[K]>>,
          options?: CallOptions,
        ) => Promise<Output<S[K]>>
      : never;
} & { close(): void };

export interface ClientOptions {
  credentials?: ChannelCredentials;
  /** Metadata sent with every call, e.g. `{ authorization: "Bearer …" }`. */
  metadata?: Record<string, string>;
  /** grpc-js channel options. */
  channelOptions?: Record<string, string | number>;
}

export function createClient<S extends GenServiceMethods>(
  service: GenService<S>,
  target: string,
  options: ClientOptions = {},
): ServiceClient<S> {
  const client = new Client(
    target,
    options.credentials ?? credentials.createInsecure(),
    options.channelOptions ?? {},
  );
  const out: Record<string, unknown> = { close: () => client.close() };

  const prepare = (callOptions: CallOptions | undefined) => {
    const md = new Metadata();
    for (const [k, v] of Object.entries({ ...options.metadata, ...callOptions?.metadata })) md.set(k, v);
    const grpcOptions: GrpcCallOptions = {};
    if (callOptions?.timeoutMs !== undefined) grpcOptions.deadline = Date.now() + callOptions.timeoutMs;
    return { md, grpcOptions };
  };

  for (const method of service.methods) {
    const path = `/${service.typeName}/${method.name}`;
    const serialize = (m: unknown) =>
      Buffer.from(toBinary(method.input, create(method.input, m as MessageInitShape<typeof method.input>)));
    const deserialize = (b: Buffer) => fromBinary(method.output, b);

    if (method.methodKind === "unary") {
      out[method.localName] = (req: unknown, callOptions?: CallOptions) =>
        new Promise((resolve, reject) => {
          const { md, grpcOptions } = prepare(callOptions);
          const once = answerOnce(resolve, reject);
          const call = client.makeUnaryRequest(path, serialize, deserialize, req, md, grpcOptions, once.done);
          once.cancelOn(callOptions?.signal, call);
        });
    } else if (method.methodKind === "client_streaming") {
      out[method.localName] = (reqs: AsyncIterable<unknown> | Iterable<unknown>, callOptions?: CallOptions) =>
        new Promise((resolve, reject) => {
          const { md, grpcOptions } = prepare(callOptions);
          const once = answerOnce(resolve, reject);
          const call = client.makeClientStreamRequest(
            path,
            serialize,
            deserialize,
            md,
            grpcOptions,
            once.done,
          );
          once.cancelOn(callOptions?.signal, call);
          void (async () => {
            try {
              for await (const r of reqs) {
                if (!call.write(r)) await new Promise((res) => call.once("drain", res));
              }
              call.end();
            } catch (err) {
              call.cancel();
              reject(new HookpostError(Code.CANCELLED, `request stream failed: ${(err as Error).message}`));
            }
          })();
        });
    }
  }
  return out as ServiceClient<S>;
}

/** The answer of a call that ends once: rejects with a HookpostError; an abort cancels the call. */
function answerOnce(resolve: (value: unknown) => void, reject: (err: unknown) => void) {
  let detach = () => {};
  return {
    done: (err: ServiceError | null, value?: unknown) => {
      detach();
      if (err) reject(HookpostError.fromServiceError(err));
      else resolve(value);
    },
    cancelOn: (signal: AbortSignal | undefined, call: { cancel(): void }) => {
      detach = onAbort(signal, () => call.cancel());
    },
  };
}

/** Cancels on abort; returns a function that removes the listener once the call ended. */
function onAbort(signal: AbortSignal | undefined, cancel: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    cancel();
    return () => {};
  }
  signal.addEventListener("abort", cancel, { once: true });
  return () => signal.removeEventListener("abort", cancel);
}

/** `authorization` metadata for a source's write key (Basic, key as user, empty password). */
export function writeKeyMetadata(writeKey: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${writeKey}:`).toString("base64")}` };
}

/** `authorization` metadata for the admin token. */
export function adminMetadata(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
