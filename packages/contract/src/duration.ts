const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses `4h`, `30s`, `10m`, `1500ms`, `1h30m` or a plain number of milliseconds.
 * Throws on anything else, so a typo in an environment variable stops start-up.
 */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let end = 0;
  for (let m = re.exec(t); m; m = re.exec(t)) {
    total += Number(m[1]) * UNITS[m[2]!]!;
    end = re.lastIndex;
  }
  if (end === 0 || end !== t.length) throw new Error(`not a duration: "${text}" (use e.g. 30s, 10m, 4h)`);
  return Math.round(total);
}

export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
