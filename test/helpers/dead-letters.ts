import type { AdminClient } from "./stack.js";
import { type UntilOptions, until } from "./until.js";

/** A destination's dead letters once there are at least `n` of them (waiting as `until` does). */
export function untilDeadLetters(
  admin: AdminClient,
  destinationId: string,
  n: number,
  options: UntilOptions,
) {
  return until(async () => {
    const l = (await admin.listDeadLetters({ destinationId })).deadLetters;
    return l.length >= n && l;
  }, options);
}
