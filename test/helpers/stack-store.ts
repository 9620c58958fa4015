import { ConfigStore } from "@hookpost/core";
import { afterAll, beforeAll } from "vitest";
import { Stack, type StackOptions } from "./stack.js";

/**
 * For a test file: a Stack, and a ConfigStore of the test's own that reads the configuration
 * bucket straight (not through the API under test); started before its tests, closed after them.
 */
export function stackWithStore(options?: StackOptions): {
  readonly stack: Stack;
  readonly store: ConfigStore;
} {
  const t = {} as { stack: Stack; store: ConfigStore };
  beforeAll(async () => {
    t.stack = await Stack.start(options);
    t.store = await ConfigStore.open(t.stack.nc);
  });
  afterAll(async () => {
    t.store?.close();
    await t.stack?.close();
  });
  return t;
}
