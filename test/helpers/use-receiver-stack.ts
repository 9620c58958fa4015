import { afterAll, beforeAll } from "vitest";
import { lateBound } from "./late-bound.js";
import { Receiver } from "./receiver.js";
import { type IngestClient, Stack, type StackOptions } from "./stack.js";

export interface ReceiverStack {
  readonly stack: Stack;
  readonly src: { id: string; writeKey: string; client: IngestClient };
  /** A receiver of its own per name, so what one gets is only what its destination sent. */
  readonly rx: Record<string, Receiver>;
}

/**
 * A Stack, one source and a receiver per name for the whole test file: started before its tests
 * (and before the file's own beforeAll hooks registered after this call), closed after them.
 * `stack` and `src` stand for what the hook starts (read them inside tests and hooks); `rx` is
 * filled in place.
 */
export function useReceiverStack(
  sourceName: string,
  receiverNames: readonly string[],
  options: StackOptions,
): ReceiverStack {
  let stack: Stack | undefined;
  let src: ReceiverStack["src"] | undefined;
  const rx: Record<string, Receiver> = {};
  beforeAll(async () => {
    stack = await Stack.start(options);
    src = await stack.source(sourceName);
    for (const name of receiverNames) rx[name] = await Receiver.http();
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all(Object.values(rx).map((r) => r.close()));
  });
  return {
    stack: lateBound(() => stack, "useReceiverStack: stack"),
    src: lateBound(() => src, "useReceiverStack: src"),
    rx,
  };
}
