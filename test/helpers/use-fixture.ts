import { afterAll, beforeAll } from "vitest";
import { lateBound } from "./late-bound.js";

/**
 * A fixture for the enclosing file or describe block: `start`ed in its beforeAll (before hooks
 * registered after this call), closed in its afterAll. The value stands for the started fixture
 * (reading it earlier throws, naming `what`): use it inside tests and hooks.
 */
export function useFixture<T extends { close(): Promise<void> | void }>(
  start: () => Promise<T>,
  what: string,
): T {
  let fixture: T | undefined;
  beforeAll(async () => {
    fixture = await start();
  });
  afterAll(async () => {
    await fixture?.close();
  });
  return lateBound(() => fixture, what);
}
