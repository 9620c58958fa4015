import { fileURLToPath } from "node:url";
export interface Figure {
  name: string;
  value: number | string;
  unit: string;
  note?: string;
  /**
   * What this machine can do for the same work, measured in the same run (same unit); the
   * table prints it beside the figure with the ratio figure / limit (for latencies: the target).
   */
  limit?: { name: string; value: number };
}

function show(v: number | string): string {
  if (typeof v === "string") return v;
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return v.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

function limitCells(f: Figure): [string, string] {
  if (!f.limit) return ["", ""];
  const ratio = typeof f.value === "number" && f.limit.value > 0 ? f.value / f.limit.value : Number.NaN;
  return [
    `${show(Math.round(f.limit.value))} (${f.limit.name})`,
    Number.isNaN(ratio) ? "" : `${ratio.toFixed(2)}x`,
  ];
}

/** Prints figures as an aligned plain-text table on stdout. */
export function printTable(figures: Figure[]): void {
  const rows = figures.map((f) => [f.name, show(f.value), f.unit, ...limitCells(f), f.note ?? ""]);
  const head = ["figure", "value", "unit", "limit", "ratio", "note"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 1 || i === 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  console.log(line(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows) console.log(line(r));
}

/** True when the module (its `import.meta.url`) is the script node was started with. */
export function isMainModule(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && fileURLToPath(moduleUrl) === process.argv[1];
}

/** Run as a script: prints the benchmark's figures; `exit` ends the process (lingering timers). */
export async function printIfMain(
  moduleUrl: string,
  bench: () => Promise<Figure[]>,
  exit = false,
): Promise<void> {
  if (!isMainModule(moduleUrl)) return;
  printTable(await bench());
  if (exit) process.exit(0);
}
