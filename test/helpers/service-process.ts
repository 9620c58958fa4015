import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { until } from "./until.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export type LogRecord = Record<string, unknown>;

/** A service (`services/<name>/main.ts`) running as a real child process through tsx. */
export interface ServiceProcess {
  proc: ChildProcess;
  records: LogRecord[];
  output: string[];
  /** Exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** The first log record with this msg (rejects on timeout or exit). */
  waitFor(msg: string, timeoutMs?: number): Promise<LogRecord>;
}

export function spawnService(entry: string, env: Record<string, string>, cwd = ROOT): ServiceProcess {
  return spawnNode(["--conditions=@hookpost/source", "--import", "tsx", join(cwd, entry)], env, cwd);
}

/** `node <args>` as a child process that logs pino JSON lines (a service, built or not). */
export function spawnNode(args: string[], env: Record<string, string>, cwd = ROOT): ServiceProcess {
  const proc = spawn(process.execPath, args, {
    cwd,
    // Only what a service needs: nothing of the test's environment leaks in. No HTTP listener
    // unless asked for: its default port (8080) would clash between test files running at once.
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", HTTP_ADDR: "off", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const records: LogRecord[] = [];
  const output: string[] = [];
  // HOOKPOST_TEST_LOG_DIR: keep each service's output (reading a failed cluster run afterwards).
  const logDir = process.env.HOOKPOST_TEST_LOG_DIR;
  const file = logDir
    ? createWriteStream(join(logDir, `${basename(dirname(args.at(-1) ?? "node"))}-${proc.pid}.log`))
    : undefined;
  for (const stream of [proc.stdout!, proc.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      output.push(line);
      file?.write(`${line}\n`);
      try {
        const rec = JSON.parse(line) as LogRecord;
        records.push(rec);
      } catch {
        // not JSON (a Node warning)
      }
    });
  }
  const exited = new Promise<number | null>((res) => proc.once("exit", (code) => res(code)));
  return {
    proc,
    records,
    output,
    exited,
    waitFor: (msg, timeoutMs = 30_000) => {
      const seen = () => records.find((r) => r.msg === msg);
      const exitedFirst = exited.then((code) => {
        const r = seen();
        if (r) return r;
        throw new Error(`exited (${code}) before "${msg}":\n${output.join("\n")}`);
      });
      const logged = until(seen, { timeout: timeoutMs, interval: 10, message: `a "${msg}" log line` }).catch(
        (err: Error) => {
          throw new Error(`${err.message}:\n${output.join("\n")}`);
        },
      );
      return Promise.race([logged, exitedFirst]);
    },
  };
}

/** Resolves with the exit code, or rejects when the process is still running after `ms`. */
export async function exitWithin(p: ServiceProcess, ms: number): Promise<number | null> {
  const timeout = sleep(ms, "timeout" as const, { ref: false }); // not a wait: the deadline asserted
  const r = await Promise.race([p.exited, timeout]);
  if (r === "timeout") throw new Error(`still running ${ms} ms after the signal:\n${p.output.join("\n")}`);
  return r;
}

/** After the tests: a child process still running is killed (SIGKILL), so none outlives its file. */
export function killIfRunning(proc: ChildProcess | undefined): void {
  if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
}
