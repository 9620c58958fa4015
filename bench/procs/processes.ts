import { type ChildProcess, execFileSync, fork, spawn } from "node:child_process";
import { type Dirent, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { imageEnv } from "../../test/helpers/dockerfile.js";
import { ROOT, type ServiceProcess, spawnNode } from "../../test/helpers/service-process.js";
import { type AdminClient, adminClient, STACK_ADMIN_TOKEN } from "../../test/helpers/stack.js";
import { until } from "../../test/helpers/until.js";
import type { RawForwarderOptions } from "./raw-forwarder-child.js";

const HERE = fileURLToPath(new URL(".", import.meta.url));

/**
 * Node flags for the Hookpost service processes of a bench: `BENCH_CPU_PROF=<dir>` profiles
 * them (`node --cpu-prof`), one .cpuprofile per process, written when it exits.
 */
function profileFlags(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

/**
 * The Node flags the image's services start with (its NODE_OPTIONS), or `BENCH_NODE_FLAGS`
 * (space-separated) instead, to compare.
 */
function nodeFlags(): string[] {
  return (process.env.BENCH_NODE_FLAGS ?? imageEnv().NODE_OPTIONS ?? "").split(" ").filter(Boolean);
}

/**
 * Node arguments that run a Hookpost service as production does (`node services/<name>/dist/main.js`,
 * the Dockerfile's command), building first when a source is newer than its output. Not through
 * tsx: its loader cost about a quarter more CPU per delivery (measured 419-466 against 320-327 µs
 * of dispatcher + nats-server), which is not the product's.
 */
export function serviceArgs(name: "api" | "dispatcher"): string[] {
  buildIfStale();
  return [...nodeFlags(), `${ROOT}/services/${name}/dist/main.js`];
}

/**
 * Settings every service process of a bench gets on top of the bench's own, to compare a
 * configuration: `BENCH_SERVICE_ENV="ATTEMPT_LOG=off DIRECT_DELIVERY=off"` (space-separated).
 */
function serviceEnv(): Record<string, string> {
  const pairs = (process.env.BENCH_SERVICE_ENV ?? "").split(" ").filter(Boolean);
  return Object.fromEntries(
    pairs.map((pair) => {
      const at = pair.indexOf("=");
      if (at <= 0) throw new Error(`BENCH_SERVICE_ENV: "${pair}" is not NAME=value`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

/** The machine's cores, read before the bench pins itself (availableParallelism() is then 1). */
export const MACHINE_CORES = availableParallelism();

/**
 * BENCH_PIN=1: delivery (the dispatcher replicas, the raw forwarder) runs on CPU 0 and the rest
 * (nats-server, the api, the receiver, the bench itself) on CPU 1. Where the scheduler puts five
 * processes on two cores moves a drain's figures from run to run; pinned, back-to-back runs of a
 * cut compare. Off by default: the figures are then the machine as production shares it.
 */
export function pin(pid: number | undefined, role: "delivery" | "rest"): void {
  if (!process.env.BENCH_PIN || pid === undefined || MACHINE_CORES < 2) return;
  // -a: every thread the process has; threads it starts later inherit the affinity.
  execFileSync("taskset", ["-a", "-p", "-c", role === "delivery" ? "0" : "1", String(pid)], {
    stdio: "ignore",
  });
}

/** A Hookpost service (`ingest` or `dispatcher`) as its own process, as in production. */
export function startService(name: "ingest" | "dispatcher", env: Record<string, string>): ServiceProcess {
  // Ingest is served by services/api since the workspace layout (issue 23).
  const service = spawnNode([...profileFlags(), ...serviceArgs(name === "ingest" ? "api" : name)], {
    OPS_ADDR: "off",
    LOG_LEVEL: "info",
    ...env,
    ...serviceEnv(),
  });
  pin(service.proc.pid, name === "dispatcher" ? "delivery" : "rest");
  return service;
}

/** The workspaces the services run from: sources and the build output they are compiled to. */
const BUILT = [
  { src: "packages/contract/src", out: "packages/contract/dist" },
  { src: "packages/core/src", out: "packages/core/dist" },
  { src: "services/api", out: "services/api/dist" },
  { src: "services/dispatcher", out: "services/dispatcher/dist" },
];
let built = false;

function buildIfStale(): void {
  if (built) return;
  const stale = BUILT.some(({ src, out }) => newest(join(ROOT, src)) > newest(join(ROOT, out)));
  if (stale) {
    console.error("bench: sources are newer than their build; npm run build");
    execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  }
  built = true;
}

/** The latest modification time of a file under `dir` (build output and dependencies left out); 0 if none. */
function newest(dir: string): number {
  let latest = 0;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== "node_modules" && e.name !== "dist") latest = Math.max(latest, newest(path));
    } else latest = Math.max(latest, statSync(path).mtimeMs);
  }
  return latest;
}

/**
 * A bench child process (procs/*-child.ts) compiled to JavaScript beside it (procs/dist/), so that
 * the limits run without a TypeScript loader as the services do. Its imports are packages only.
 */
function childEntry(file: string): string {
  buildIfStale();
  const out = join(HERE, "dist", basename(file).replace(/\.ts$/, ".mjs"));
  const js = ts.transpileModule(readFileSync(join(HERE, file), "utf8"), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  mkdirSync(join(HERE, "dist"), { recursive: true });
  writeFileSync(out, js);
  return out;
}

/** The API (ingest) in its own process, gRPC and HTTP on free loopback ports. */
/**
 * For an api whose one source carries the whole load: the per-source quotas are sized for many
 * sources sharing a replica, and the source's rate (10 000 calls/s by default) would cap the
 * figure measured, or its pending bytes refuse calls no dispatcher drains.
 */
export const ONE_SOURCE_QUOTAS: Record<string, string> = {
  SOURCE_MAX_PENDING_BYTES: String(1024 ** 3),
  SOURCE_MAX_RATE: "1000000",
  SOURCE_MAX_BURST: "1000000",
};

export function startApi(natsUrl: string, env: Record<string, string> = {}): ServiceProcess {
  return startService("ingest", {
    NATS_URL: natsUrl,
    INGEST_ADDR: "127.0.0.1:0",
    HTTP_ADDR: "127.0.0.1:0",
    ADMIN_TOKEN: STACK_ADMIN_TOKEN,
    ...env,
  });
}

/** Waits until the API listens, then creates the bench's source through its admin API (close `admin`). */
export async function benchSource(api: ServiceProcess): Promise<{
  grpc: string;
  http: string;
  admin: AdminClient;
  sourceId: string;
  writeKey: string;
}> {
  const listening = await api.waitFor("ingest listening");
  const grpc = String(listening.address);
  const admin = adminClient(grpc);
  const source = await admin.createSource({ name: "bench" });
  return {
    grpc,
    http: String(listening.http),
    admin,
    sourceId: source.source!.id,
    writeKey: source.writeKey,
  };
}

/** SIGTERM, then waits for the exit (a profiled process writes its profile on exit). */
export async function stopProcess(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => p.once("exit", () => resolve()));
  p.kill("SIGTERM");
  await exited;
}

/** The raw gRPC limit server (procs/empty-grpc-child.ts); resolves with its process and address. */
export async function startEmptyGrpc(): Promise<{ proc: ChildProcess; address: string }> {
  const proc = spawn(process.execPath, [childEntry("empty-grpc-child.ts")], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once("line", resolve);
    proc.once("exit", (code) => reject(new Error(`empty gRPC server exited (${code})`)));
  });
  return { proc, address: (JSON.parse(line) as { address: string }).address };
}

/**
 * The raw forwarder (procs/raw-forwarder-child.ts) in its own process, consuming `stream` through
 * a new durable `consumer`; resolves once it consumes. Stop it with `stopForwarder`.
 */
export async function startRawForwarder(o: RawForwarderOptions): Promise<ChildProcess> {
  const proc = fork(childEntry("raw-forwarder-child.ts"), [JSON.stringify(o)], {
    execArgv: profileFlags(),
    stdio: "inherit",
  });
  pin(proc.pid, "delivery");
  await new Promise<void>((resolve, reject) => {
    proc.once("message", () => resolve());
    proc.once("exit", (code) => reject(new Error(`raw forwarder exited (${code})`)));
  });
  return proc;
}

/** Disconnects the raw forwarder and waits for its exit. */
export async function stopForwarder(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  proc.disconnect();
  await exited;
}

/**
 * The webhook receiver (procs/receiver-child.ts) in its own process; keeps the arrival time of
 * every Idempotency-Key (the first one) and counts requests.
 */
export class ReceiverProcess {
  readonly arrivals = new Map<string, number>();
  /** First arrivals per tag (the key up to its last "-"). */
  readonly #perTag = new Map<string, number>();
  requests = 0;
  readonly #waiters = new Set<() => void>();

  private constructor(
    readonly proc: ChildProcess,
    readonly url: string,
  ) {
    proc.on("message", (m: { arrivals?: Array<[string, number]> }) => {
      if (!m.arrivals) return;
      for (const [id, at] of m.arrivals) {
        this.requests++;
        if (this.arrivals.has(id)) continue;
        this.arrivals.set(id, at);
        const tag = id.slice(0, id.lastIndexOf("-"));
        this.#perTag.set(tag, (this.#perTag.get(tag) ?? 0) + 1);
      }
      for (const w of this.#waiters) w();
    });
  }

  static async start(): Promise<ReceiverProcess> {
    const proc = fork(childEntry("receiver-child.ts"), [], {
      execArgv: [],
      stdio: "inherit",
    });
    pin(proc.pid, "rest");
    const port = await new Promise<number>((resolve, reject) => {
      proc.once("message", (m: { port: number }) => resolve(m.port));
      proc.once("exit", (code) => reject(new Error(`receiver exited (${code})`)));
    });
    return new ReceiverProcess(proc, `http://127.0.0.1:${port}/hook`);
  }

  /** Resolves once the keys `<tag>-0` .. `<tag>-<count - 1>` all arrived (rejects after `timeoutMs`). */
  waitForTag(tag: string, count: number, timeoutMs = 300_000): Promise<void> {
    let next = 0;
    return this.#wait(timeoutMs, () => {
      while (next < count && this.arrivals.has(`${tag}-${next}`)) next++;
      return next === count ? undefined : `only ${next} of ${count} "${tag}" deliveries arrived in order`;
    });
  }

  /** Resolves once `count` keys `<tag>-*` arrived, in any order. */
  waitForTagCount(tag: string, count: number, timeoutMs = 300_000): Promise<void> {
    return this.#wait(timeoutMs, () => {
      const n = this.#perTag.get(tag) ?? 0;
      return n >= count ? undefined : `only ${n} of ${count} "${tag}" deliveries arrived`;
    });
  }

  /** `missing()` says what is still missing, or undefined when done. */
  async #wait(timeoutMs: number, missing: () => string | undefined): Promise<void> {
    const done = () => missing() === undefined;
    if (done()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(missing()));
      }, timeoutMs);
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      this.#waiters.add(check);
    });
  }

  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.proc.once("exit", () => resolve()));
    this.proc.disconnect();
    await exited;
  }
}

/** CPU time (user + system, ms) a process used so far, from /proc (Linux); NaN elsewhere. */
export function cpuMs(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the file (11 and 12 after the name), in 1/100 s.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

/** A memory figure of a process from /proc/<pid>/status in MiB: VmRSS now, VmHWM the peak so far. */
export function memoryMiB(pid: number | undefined, field: "VmRSS" | "VmHWM" = "VmRSS"): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1];
    return kib === undefined ? Number.NaN : Number(kib) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** Open file descriptors of a process (sockets included), from /proc; NaN elsewhere. */
export function openFds(pid: number | undefined): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

/**
 * Endpoints that accept a connection and never answer (procs/hung-child.ts), in their own
 * process, one listener (origin) each; counts the connections held open at the server side.
 */
export class HungEndpoints {
  open = 0;
  peak = 0;
  accepted = 0;

  private constructor(
    readonly proc: ChildProcess,
    readonly urls: string[],
  ) {
    proc.on("message", (m: { open?: number; peak?: number; accepted?: number }) => {
      if (m.open === undefined) return;
      this.open = m.open;
      this.peak = m.peak!;
      this.accepted = m.accepted!;
    });
  }

  static async start(count: number): Promise<HungEndpoints> {
    const proc = fork(childEntry("hung-child.ts"), [String(count)], {
      execArgv: [],
      stdio: "inherit",
    });
    const ports = await new Promise<number[]>((resolve, reject) => {
      proc.once("message", (m: { ports: number[] }) => resolve(m.ports));
      proc.once("exit", (code) => reject(new Error(`hung endpoints exited (${code})`)));
    });
    return new HungEndpoints(
      proc,
      ports.map((p) => `http://127.0.0.1:${p}/hook`),
    );
  }

  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.proc.once("exit", () => resolve()));
    this.proc.disconnect();
    await exited;
  }
}

/**
 * Polls the dispatcher's /readyz until it is ready with `revision` applied. Undefined when it
 * was; otherwise what /readyz said last (the bench goes on and the figure says so).
 */
export async function waitReady(
  opsAddress: string,
  revision: number,
  timeoutMs: number,
): Promise<string | undefined> {
  let said = "{}";
  try {
    await until(
      async () => {
        said = "{}";
        const r = await fetch(`http://${opsAddress}/readyz`);
        const body = (await r.json().catch(() => ({}))) as { configRevision?: number };
        said = JSON.stringify(body);
        return r.status === 200 && (body.configRevision ?? 0) >= revision;
      },
      { timeout: timeoutMs, interval: 250, message: `the dispatcher ready with revision ${revision}` },
    );
    return undefined;
  } catch {
    console.error(`dispatcher not ready after ${timeoutMs / 1000} s (${said}); going on`);
    return said;
  }
}
