/**
 * `npm start`: successful deliveries in summary, not one line each. Reads the dispatcher's
 * delivery counter from its /metrics every few seconds and prints what was delivered since,
 * per destination when the counter has a `destination` label.
 */

const COUNTER = "hookpost_dispatcher_deliveries_total";

/** Delivered counts by destination ("" when the counter has no destination label). */
export function deliveredCounts(metricsText: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of metricsText.split("\n")) {
    if (!line.startsWith(`${COUNTER}{`)) continue;
    const m = /^\w+\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (labels.outcome !== "delivered") continue;
    const key = labels.destination ?? "";
    out.set(key, (out.get(key) ?? 0) + Number(m[2]));
  }
  return out;
}

/** `✓ 3 delivered in the last 5 s (crm: 2, demo-hook: 1)`, or undefined when nothing was. */
export function deliveredLine(
  before: Map<string, number>,
  now: Map<string, number>,
  seconds: number,
): string | undefined {
  const parts: string[] = [];
  let total = 0;
  for (const [dest, n] of [...now].sort(([a], [b]) => a.localeCompare(b))) {
    const delta = n - (before.get(dest) ?? 0);
    if (delta <= 0) continue;
    total += delta;
    if (dest) parts.push(`${dest}: ${delta}`);
  }
  if (total === 0) return undefined;
  return `✓ ${total} delivered in the last ${seconds} s${parts.length > 0 ? ` (${parts.join(", ")})` : ""}`;
}

/** Prints the summary every `seconds` until the returned function is called. */
export function summarizeDeliveries(
  opsAddress: string,
  print: (line: string) => void,
  seconds = 5,
): () => void {
  let before: Map<string, number> | undefined;
  const tick = async () => {
    try {
      const res = await fetch(`http://${opsAddress}/metrics`, { signal: AbortSignal.timeout(3000) });
      const now = deliveredCounts(await res.text());
      if (before) {
        const line = deliveredLine(before, now, seconds);
        if (line) print(line);
      }
      before = now;
    } catch {
      // the dispatcher is restarting or stopping: try again next time
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), seconds * 1000);
  timer.unref();
  return () => clearInterval(timer);
}
