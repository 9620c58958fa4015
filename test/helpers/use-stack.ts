import { Stack, type StackOptions } from "./stack.js";
import { useFixture } from "./use-fixture.js";

/** A Stack for the whole test file (see useFixture): use it inside tests and hooks. */
export function useStack(options: StackOptions = {}): Stack {
  return useFixture(() => Stack.start(options), "useStack");
}
