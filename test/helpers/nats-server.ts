import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { GiveUp, until } from "./until.js";

const BIN = process.env.NATS_SERVER_BIN ?? "nats-server";
const LOG_DIR = process.env.HOOKPOST_TEST_LOG_DIR;

/** Servers still running; killed when the test process exits, even after a failed afterAll. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const p of running) p.kill("SIGKILL");
});

/**
 * A real nats-server with JetStream on a random loopback port, private to one test file.
 * It can be killed and restarted on the same port and store, to test outages.
 */
export class NatsServer {
  port = 0;
  #proc: ChildProcess | undefined;
  readonly dir: string;
  readonly #extraArgs: string[];

  private constructor(dir: string, extraArgs: string[]) {
    this.dir = dir;
    this.#extraArgs = extraArgs;
  }

  /** The server process's pid (benchmarks read its CPU time from /proc). */
  get pid(): number | undefined {
    return this.#proc?.pid;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Sends a signal without waiting for an exit (SIGSTOP/SIGCONT freeze and thaw the server). */
  signal(signal: NodeJS.Signals): void {
    this.#proc?.kill(signal);
  }

  static async start(extraArgs: string[] = []): Promise<NatsServer> {
    const dir = await mkdtemp(join(tmpdir(), "hookpost-nats-"));
    const server = new NatsServer(dir, extraArgs);
    await server.#spawn();
    return server;
  }

  async #spawn(): Promise<void> {
    const portArg = this.port === 0 ? "-1" : String(this.port);
    const proc = spawn(
      BIN,
      [
        "-a",
        "127.0.0.1",
        "-p",
        portArg,
        "--ports_file_dir",
        this.dir,
        "-js",
        "-sd",
        join(this.dir, "js"),
        ...this.#extraArgs,
        // HOOKPOST_TEST_LOG_DIR: keep each server's log (reading a failed cluster run afterwards).
        ...(LOG_DIR ? ["-l", join(LOG_DIR, `nats-${basename(this.dir)}.log`)] : []),
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    proc.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    this.#proc = proc;
    running.add(proc);
    proc.once("exit", () => running.delete(proc));
    const portsFile = `nats-server_${proc.pid}.ports`;
    this.port = await until(
      async () => {
        if (proc.exitCode !== null) throw new GiveUp(`nats-server exited (${proc.exitCode}): ${stderr}`);
        const text = await readFile(join(this.dir, portsFile), "utf8").catch(() => "");
        if (!text) return undefined;
        // 2.9 names the client listener "nats", newer servers "client".
        const ports = JSON.parse(text) as { nats?: string[]; client?: string[] };
        return Number(new URL((ports.client ?? ports.nats)![0]!).port);
      },
      { timeout: 10_000, message: "nats-server to write its ports file" },
    ).catch((err: Error) => {
      throw err instanceof GiveUp ? err : new Error(`${err.message}: ${stderr}`);
    });
  }

  /** Stops the server (SIGKILL by default: an outage, not a shutdown). */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const proc = this.#proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    proc.kill(signal);
    await exited;
    this.#proc = undefined;
  }

  /** Starts again on the same port with the same JetStream store. */
  async restart(): Promise<void> {
    await this.kill();
    await this.#spawn();
  }

  async stop(): Promise<void> {
    await this.kill("SIGTERM");
    await rm(this.dir, { recursive: true, force: true });
  }
}
