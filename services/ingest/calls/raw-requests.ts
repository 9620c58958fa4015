import type { Metadata, Server } from "@grpc/grpc-js";

/**
 * Keeps the bytes of each unary gRPC request as they arrived, for the contract's size checks and
 * its `__proto__` scan (decoding loses both: sizes would need a re-encoding, ~75 µs per call, and
 * the decoder drops `__proto__` Struct keys). The bytes are looked up by the call's Metadata
 * object, which the handler receives as `ctx.metadata` (a WeakMap: nothing outlives the call).
 */
export class RawRequests {
  readonly #bytes = new WeakMap<Metadata, Buffer>();

  /** The request bytes of the call whose metadata this is. */
  of(metadata: Metadata): Buffer | undefined {
    return this.#bytes.get(metadata);
  }

  /**
   * A view of `server` whose addService records each unary request before its handler runs;
   * pass it to lib/grpc's addService in place of the server.
   */
  recording(server: Server): Server {
    const bytes = this.#bytes;
    const addService: Server["addService"] = (definition, handlers) => {
      const wrapped: typeof handlers = {};
      for (const [name, handler] of Object.entries(handlers)) {
        const method = definition[name];
        wrapped[name] =
          method && !method.requestStream && !method.responseStream
            ? (((call: { metadata: Metadata; request: Buffer }, callback: unknown) => {
                bytes.set(call.metadata, call.request);
                return (handler as (c: unknown, cb: unknown) => void)(call, callback);
              }) as typeof handler)
            : handler;
      }
      server.addService(definition, wrapped);
    };
    return new Proxy(server, {
      get: (target, prop, receiver) =>
        prop === "addService" ? addService : Reflect.get(target, prop, receiver),
    });
  }
}
