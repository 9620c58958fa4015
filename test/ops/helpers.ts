import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export {
  exitWithin,
  type LogRecord,
  ROOT,
  type ServiceProcess,
  spawnNode,
  spawnService,
} from "../helpers/service-process.js";

import { ROOT } from "../helpers/service-process.js";

/** HTTP status of a GET (0 when the connection fails). */
export async function httpStatus(url: string): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** One Prometheus series: name, labels, value. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (the subset prom-client writes). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

export async function scrape(opsAddress: string): Promise<Sample[]> {
  const res = await fetch(`http://${opsAddress}/metrics`, { signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

/** Sum of the series named `name` whose labels include `labels`. */
export function metric(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** True when some series of that name exists. */
export function hasMetric(samples: Sample[], name: string): boolean {
  return samples.some((s) => s.name === name);
}

/**
 * A copy of the working tree as a fresh clone would have it (tracked and new, not ignored files;
 * no dist/, no .data/) in a temporary folder. `node_modules` is linked: to the repo's, or (with
 * `without`) to a folder linking every package but those, to prove they are not needed.
 */
export async function copyRepo(options: { without?: string[] } = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hookpost-copy-"));
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
  })
    .toString()
    .split("\0")
    .filter((f) => f !== "" && existsSync(join(ROOT, f)));
  for (const f of files) {
    await mkdir(dirname(join(dir, f)), { recursive: true });
    await copyFile(join(ROOT, f), join(dir, f));
  }
  const modules = join(ROOT, "node_modules");
  if (!options.without?.length) {
    await symlink(modules, join(dir, "node_modules"), "dir");
  } else {
    await mkdir(join(dir, "node_modules"));
    for (const name of await readdir(modules)) {
      if (name === ".bin" || options.without.includes(name)) continue;
      await symlink(join(modules, name), join(dir, "node_modules", name), "dir");
    }
  }
  return dir;
}

/** Pids of the processes whose command line mentions `text` (this machine's /proc). */
export async function processesMentioning(text: string): Promise<{ pid: number; cmd: string }[]> {
  const out: { pid: number; cmd: string }[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmd.includes(text)) out.push({ pid: Number(entry), cmd: cmd.replaceAll("\0", " ").trim() });
  }
  return out;
}
