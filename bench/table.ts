export interface Figure {
  name: string;
  value: number | string;
  unit: string;
  note?: string;
}

function show(v: number | string): string {
  if (typeof v === "string") return v;
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return v.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

/** Prints figures as an aligned plain-text table on stdout. */
export function printTable(figures: Figure[]): void {
  const rows = figures.map((f) => [f.name, show(f.value), f.unit, f.note ?? ""]);
  const head = ["figure", "value", "unit", "note"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 1 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  console.log(line(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows) console.log(line(r));
}
