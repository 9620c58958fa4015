import { Counter, Gauge, type Registry } from "prom-client";

/** A gauge read at each scrape from `read` (a live figure kept elsewhere). */
export function liveGauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** A counter read at each scrape from `read`: its totals by `label` value (kept elsewhere). */
export function liveCounter(
  registry: Registry,
  name: string,
  help: string,
  label: string,
  read: () => Record<string, number>,
): void {
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      this.reset();
      for (const [value, n] of Object.entries(read())) this.inc({ [label]: value }, n);
    },
  });
}
