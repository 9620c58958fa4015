import { createHash } from "node:crypto";
import { partitionOf } from "@hookpost/core";

/** Keys are spread over this many slots, each owned by one replica (rendezvous per slot). */
const KEY_SLOTS = 1 << 20;

/**
 * Rendezvous (highest random weight) hashing: partition `q` belongs to the live replica with the
 * highest score for (replica, q). Every replica computes the same answer from the same live set,
 * and a replica joining or leaving moves only the partitions it wins or held (about 1/N of them).
 */
export function ownerOf(q: number, live: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const replica of live) {
    const score = createHash("sha256").update(`${replica}/${q}`).digest().readUInt32BE(0);
    if (score > bestScore || (score === bestScore && best !== undefined && replica < best)) {
      best = replica;
      bestScore = score;
    }
  }
  return best;
}

/** The ordered partitions (0..partitions-1) that `self` owns among `live`. */
export function ownedPartitions(self: string, live: readonly string[], partitions: number): Set<number> {
  const out = new Set<number>();
  // A replica alone (or not yet in its own view) owns everything rather than nothing.
  const set = live.includes(self) ? live : [...live, self];
  for (let q = 0; q < partitions; q++) if (ownerOf(q, set) === self) out.add(q);
  return out;
}

/**
 * Whether `self` is the one replica among `live` that owns `key` (a destination whose batches or
 * dead letters one replica handles). A replica alone, or not yet in its own view, owns it.
 */
export function ownsKey(self: string, live: readonly string[], key: string): boolean {
  const set = live.includes(self) ? live : [...live, self];
  return ownerOf(partitionOf(key, KEY_SLOTS), set) === self;
}
