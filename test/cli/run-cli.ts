import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect } from "vitest";
import { Receiver, type Reply } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const BIN = fileURLToPath(new URL("../../packages/cli/bin/hookpost.js", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node packages/cli/bin/hookpost.js …` as a real child process (its launcher runs the build
 * when it is current, else the sources: never a stale dist/), with only the given Hookpost
 * variables set (none leak in from the test's environment).
 */
export function hookpost(
  args: string[],
  env: Record<string, string | undefined> = {},
  stdin?: string,
): Promise<CliResult> {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: cliEnv(env),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  child.stdin.end(stdin ?? "");
  return new Promise((resolve, reject) => {
    // not a wait: gives up on a CLI that hangs
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`hookpost ${args.join(" ")} did not finish in 30 s\n${stdout}\n${stderr}`));
    }, 30_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The test's environment without Hookpost variables, plus `env`. */
export function cliEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  for (const k of Object.keys(base)) {
    if (k === "ADMIN_TOKEN" || k.startsWith("HOOKPOST_")) delete base[k];
  }
  return { ...base, NO_COLOR: "1", ...env };
}

/**
 * `hookpost` with the test file's environment (read at each call: it is set in a hook) and
 * `extraEnv`, checking that nothing the CLI prints contains `secret` (the admin token).
 */
export function cliRunner(env: () => Record<string, string>, secret: string) {
  return async (args: string[], extraEnv: Record<string, string | undefined> = {}, stdin?: string) => {
    const r = await hookpost(args, { ...env(), ...extraEnv }, stdin);
    expect(r.stdout + r.stderr).not.toContain(secret);
    return r;
  };
}

/** `hookpost` that must exit 0: a failure names the command and shows all it printed. */
export async function hookpostExitsZero(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<CliResult> {
  const r = await hookpost(args, env);
  expect(r.code, `hookpost ${args.join(" ")}\n${r.stdout}\n${r.stderr}`).toBe(0);
  return r;
}

/** A run that succeeded with nothing on stderr. */
export function ok(r: CliResult): CliResult {
  expect(r.stderr, r.stderr).toBe("");
  expect(r.code).toBe(0);
  return r;
}

/** The stderr of a run that failed with exit code `code` (1: refused, 2: usage). */
export function failed(r: CliResult, code: number): string {
  expect(r.code, r.stderr).toBe(code);
  return r.stderr;
}

/** The `--json` output of a command that must succeed. */
export async function runJson<T = Record<string, unknown>>(user: CliUser, args: string[]): Promise<T> {
  return JSON.parse(ok(await user.run(["--json", ...args])).stdout) as T;
}

/** The CLI as a test file's user: its scratch folder, its environment, and cliRunner. */
export interface CliUser {
  /** A folder for the files the tests write (removed after the file's tests). */
  readonly dir: string;
  /** HOOKPOST_ENDPOINT and ADMIN_TOKEN. */
  readonly env: Record<string, string>;
  readonly run: ReturnType<typeof cliRunner>;
  /** Writes `text` to the file `name` in `dir`; its path. */
  file(name: string, text: string): Promise<string>;
}

/** A CliUser of the ingest at `endpoint()` (read when used: the ingest starts in a hook). */
export function useCliUser(endpoint: () => string, token: string): CliUser {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "hookpost-cli-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const env = () => ({ HOOKPOST_ENDPOINT: endpoint(), ADMIN_TOKEN: token });
  const folder = () => {
    if (!dir) throw new Error("useCliUser: use it inside a test or hook");
    return dir;
  };
  return {
    get dir() {
      return folder();
    },
    get env() {
      return env();
    },
    run: cliRunner(env, token),
    async file(name, text) {
      const path = join(folder(), name);
      await writeFile(path, text);
      return path;
    },
  };
}

/** `destinations create` of the CLI tests' destination crm ("CRM", header X-Team: growth); `flags` follow (its secret, more headers). */
export function createCrm(source: string, urls: readonly string[], ...flags: string[]): string[] {
  const urlFlags = urls.flatMap((u) => ["--url", u]);
  return [
    "destinations",
    "create",
    "--id",
    "crm",
    "--name",
    "CRM",
    "--source",
    source,
    ...urlFlags,
    "--header",
    "X-Team: growth",
    ...flags,
  ];
}

/** A stack with a destination's receiver that fails, for the CLI: see stackWithFailingReceiver. */
export interface FailingStack {
  readonly stack: Stack;
  /** A receiver that answers every request `reply`. */
  readonly failing: Receiver;
  /** HOOKPOST_ENDPOINT and ADMIN_TOKEN of the stack. */
  readonly env: Record<string, string>;
  /** `hookpost` with `env`, that must exit 0. */
  cli(args: string[]): Promise<CliResult>;
}

/**
 * For a CLI test file: a Stack whose retries are far apart (the "next attempt" the CLI shows
 * stays in the future while the tests look: the first retry comes after 5 to 10 min, where a 60 s
 * base could bring it after 30 s, within a file of CLI runs on a loaded machine) and a receiver
 * answering every request `reply`; started before the file's tests, closed after them.
 */
export function stackWithFailingReceiver(reply: Reply): FailingStack {
  const t = {
    cli: (args: string[]) => hookpostExitsZero(args, t.env),
  } as { stack: Stack; failing: Receiver; env: Record<string, string>; cli: FailingStack["cli"] };
  beforeAll(async () => {
    t.stack = await Stack.start({ dispatcher: { retryBaseDelayMs: 600_000 } });
    t.failing = await Receiver.http();
    t.failing.respond = () => ({ ...reply });
    t.env = { HOOKPOST_ENDPOINT: t.stack.ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN };
  });
  afterAll(async () => {
    await t.stack?.close();
    await t.failing?.close();
  });
  return t;
}
