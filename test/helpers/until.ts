/**
 * The one way tests wait: poll a fact until it holds. `condition` may be async; a thrown error
 * counts as "not yet". Resolves with the first truthy value; on timeout throws an error naming
 * what never became true (`message`) and the last value or error seen. A condition that throws
 * `GiveUp` ends the wait at once with that error (the fact can no longer become true).
 */
export type Truthy<T> = Exclude<T, undefined | null | false | 0 | "">;

export interface UntilOptions {
  /** Give up after this many ms (default 15 s). */
  timeout?: number;
  /** What should become true, for the error on timeout. */
  message?: string;
  /** Poll every this many ms (default 25). */
  interval?: number;
}

/** Thrown by a condition that can no longer hold (a process exited): `until` rethrows it at once. */
export class GiveUp extends Error {}

export async function until<T>(
  condition: () => T | Promise<T>,
  options: UntilOptions = {},
): Promise<Truthy<T>> {
  const timeout = options.timeout ?? 15_000;
  const interval = options.interval ?? 25;
  const deadline = Date.now() + timeout;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as Truthy<T>;
      last = value;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last = err;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? `error: ${last.message}` : `value: ${describe(last)}`;
      throw new Error(
        `timed out after ${timeout} ms waiting for ${options.message ?? "condition"} (last ${seen})`,
      );
    }
    await new Promise<void>((resolve) =>
      setTimeout(resolve, Math.min(interval, Math.max(1, deadline - Date.now()))),
    );
  }
}

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
