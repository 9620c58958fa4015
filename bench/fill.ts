import type { ConfigStore } from "@hookpost/core";

/** Destinations `d0`…`d<count-1>`, written 500 at a time; `sourceOf(i)` names each one's source. */
export async function putDestinations(
  store: ConfigStore,
  count: number,
  o: { sourceOf: (i: number) => string; enabled: boolean },
): Promise<void> {
  const now = new Date().toISOString();
  for (let i = 0; i < count; i += 500) {
    await Promise.all(
      Array.from({ length: Math.min(500, count - i) }, (_, j) =>
        store.putDestination({
          id: `d${i + j}`,
          name: "bench",
          sourceIds: [o.sourceOf(i + j)],
          urls: ["https://example.com/hook"],
          headers: {},
          signing: "segment",
          enabled: o.enabled,
          createdAt: now,
          updatedAt: now,
        }),
      ),
    );
  }
}

/** The median time of `runs` calls of `fn`, one after the other (ms). */
export async function medianMs(runs: number, fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
}
