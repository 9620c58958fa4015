import { expect } from "vitest";

/** The error `fn` throws, checked to be a `type`; the test fails when `fn` returns instead. */
export function thrown<E extends Error>(fn: () => unknown, type: abstract new (...args: never[]) => E): E {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    return err as E;
  }
  throw new Error(`accepted: nothing was thrown (expected a ${type.name})`);
}
