import { type ChildProcess, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Receiver } from "../helpers/receiver.js";
import { until } from "../helpers/until.js";
import { copyRepo, httpStatus, processesMentioning } from "./helpers.js";

// `npm start` on a fresh copy of the repository (no NATS_URL: it starts its own nats-server in
// the copy's .data/), every port asked as 0. The test reads what it prints, follows its
// first-event instructions with the copy's CLI, checks the calls arrive signed, then presses
// Ctrl-C (SIGINT to the whole process group, as a terminal does): everything exits.

let dir: string;
let npm: ChildProcess | undefined;
let receiver: Receiver;
const lines: string[] = [];
let exited: Promise<number | null>;

beforeAll(async () => {
  dir = await copyRepo();
  receiver = await Receiver.http();
});

afterAll(async () => {
  if (npm?.pid && npm.exitCode === null && npm.signalCode === null) {
    try {
      process.kill(-npm.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  // Whatever the launcher started and left behind (it should leave nothing).
  if (dir) for (const p of await processesMentioning(dir)) process.kill(p.pid, "SIGKILL");
  await receiver?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The copy's CLI, as its printed instructions run it (`npx hookpost …` is this bin). */
function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [join(dir, "packages/cli/bin/hookpost.js"), ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out })));
}

/**
 * Splits a printed command line into arguments: "quoted words" and <placeholders> kept whole,
 * `# comments` dropped.
 */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|(#.*$)|(<[^>]*>)|(\S+)/g)) {
    if (m[2] !== undefined) break;
    out.push(m[1] ?? m[3] ?? m[4]!);
  }
  return out;
}

const printed = (re: RegExp): RegExpExecArray => {
  for (const line of lines) {
    const m = re.exec(line);
    if (m) return m;
  }
  throw new Error(`nothing printed matches ${re}:\n${lines.join("\n")}`);
};

/** Runs `npm start` in the copy (every port asked as 0) until it printed its summary. */
async function npmStart(): Promise<ChildProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) {
    if (
      k === "NATS_URL" ||
      k === "ADMIN_TOKEN" ||
      k === "OPS_ADDR" ||
      k.startsWith("HOOKPOST_") ||
      k.startsWith("OTEL_")
    )
      delete env[k];
  }
  const proc = spawn("npm", ["start"], {
    cwd: dir,
    env: {
      ...env,
      INGEST_ADDR: "127.0.0.1:0",
      HTTP_ADDR: "127.0.0.1:0",
      INGEST_OPS_ADDR: "127.0.0.1:0",
      DISPATCHER_OPS_ADDR: "127.0.0.1:0",
      DEMO_RECEIVER_ADDR: "127.0.0.1:0",
    },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so that the test can "press Ctrl-C" on it.
    detached: true,
  });
  npm = proc;
  exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
  for (const stream of [proc.stdout!, proc.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => lines.push(line));
  }
  await until(
    () => {
      if (proc.exitCode !== null)
        throw new Error(`npm start exited (${proc.exitCode}):\n${lines.join("\n")}`);
      return lines.includes("Ctrl-C stops everything.");
    },
    { timeout: 60_000, message: "npm start to print its summary", interval: 100 },
  );
  return proc;
}

/** Ctrl-C: SIGINT to the whole foreground process group (npm, tsx, the launcher); all exit. */
async function pressCtrlC(proc: ChildProcess): Promise<void> {
  process.kill(-proc.pid!, "SIGINT");
  // not a wait: the deadline asserted (it exits within 20 s)
  const stopped = await Promise.race([exited.then(() => true), sleep(20_000, false, { ref: false })]);
  expect(stopped, `npm start still running 20 s after SIGINT:\n${lines.join("\n")}`).toBe(true);
  // (Its last lines may still be in the pipe when the exit is seen.)
  await until(() => lines.includes("stopping…"), { timeout: 10_000, message: "its stop message" });
  // Nothing it started is left (nor a zombie: the launcher waited for each of them).
  await until(async () => (await processesMentioning(dir)).length === 0, {
    timeout: 10_000,
    message: "every child process to be gone",
  });
}

describe("npm start", () => {
  it("runs the whole system, prints how to use it, delivers signed calls, and stops on Ctrl-C", async () => {
    const proc = await npmStart();

    // Where everything listens: the real ports, not the 0s asked for.
    const [, natsUrl, natsData] = printed(/^ {2}NATS \(JetStream\)\s+(\S+)\s+\(data in (\S+)\)/);
    expect(natsUrl).toMatch(/^nats:\/\/127\.0\.0\.1:[1-9]\d*$/);
    expect(natsData).toBe(join(dir, ".data", "nats"));
    const endpoint = printed(/^ {2}ingest gRPC\s+(\S+)$/)[1]!;
    expect(endpoint).toMatch(/^127\.0\.0\.1:[1-9]\d*$/);
    const ingestOps = printed(/^ {2}ingest ops\s+http:\/\/(\S+)\/healthz \/readyz \/metrics$/)[1]!;
    const dispatcherOps = printed(/^ {2}dispatcher ops\s+http:\/\/(\S+)\/healthz \/readyz \/metrics$/)[1]!;
    const demoUrl = printed(/^ {2}demo receiver\s+(\S+)/)[1]!;
    const token = printed(/^ {2}admin token\s+(\S+)$/)[1]!;
    for (const a of [ingestOps, dispatcherOps]) expect(a).toMatch(/^127\.0\.0\.1:[1-9]\d*$/);
    // The key that encrypts secrets at rest: generated on this first run, readable by its owner only.
    const keyFile = printed(/^ {2}secrets key\s+(\S+) {3}\(generated now: keep it with \.data\)$/)[1]!;
    expect(keyFile).toBe(join(dir, ".data", "secrets-keys"));
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect(await readFile(keyFile, "utf8")).toMatch(/^local-\d{8}:[A-Za-z0-9+/]{43}=\n$/);
    expect(demoUrl).toMatch(/^http:\/\/127\.0\.0\.1:[1-9]\d*\/webhook$/);
    expect(token).toMatch(/^[0-9a-f]{48}$/);
    expect(await httpStatus(`http://${ingestOps}/readyz`)).toBe(200);
    expect(await httpStatus(`http://${dispatcherOps}/readyz`)).toBe(200);
    expect(await httpStatus(`http://${dispatcherOps}/metrics`)).toBe(200);
    // The web console answers at the printed URL (built by npm start when missing).
    const consoleUrl = printed(/^ {2}web console\s+(http:\/\/\S+\/console\/)/)[1]!;
    const page = await fetch(consoleUrl);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<script[^>]+src="[^"]*\/console\/assets\/[^"]+\.js"/);

    // The printed first-event instructions, run as printed.
    const exportLine = printed(/^ {2}export (HOOKPOST_ENDPOINT=\S+ ADMIN_TOKEN=\S+)$/)[1]!;
    const cliEnv = Object.fromEntries(exportLine.split(" ").map((kv) => kv.split("=") as [string, string]));
    expect(cliEnv).toEqual({ HOOKPOST_ENDPOINT: endpoint, ADMIN_TOKEN: token });
    const steps = lines.filter((l) => l.startsWith("  npx hookpost ")).map((l) => words(l).slice(2));
    expect(steps.map((s) => s.slice(0, 2).join(" "))).toEqual([
      "sources create",
      "destinations create",
      "send track",
    ]);
    const created = await cli(steps[0]!, cliEnv);
    expect(created.code, created.out).toBe(0);
    const writeKey = /hpk_\S+/.exec(created.out)?.[0];
    expect(writeKey).toBeDefined();
    const sourceId = steps[0]![steps[0]!.indexOf("--id") + 1]!;
    expect(steps[1]).toContain(demoUrl);
    const demoDest = await cli(steps[1]!, cliEnv);
    expect(demoDest.code, demoDest.out).toBe(0);
    // And one to the test's own receiver, to check the signature from the outside.
    const ours = await cli(
      [
        "destinations",
        "create",
        "--id",
        "test-hook",
        "--name",
        "test",
        "--source",
        sourceId,
        "--url",
        receiver.url(),
        "--secret",
        "s3cret",
      ],
      cliEnv,
    );
    expect(ours.code, ours.out).toBe(0);
    await until(
      async () => {
        const res = await fetch(`http://${dispatcherOps}/readyz`);
        const body = (await res.json()) as { enabled?: number; pulling?: boolean };
        // Both destinations known; every delivery partition pulled (no consumer per destination).
        return res.status === 200 && body.enabled === 2 && body.pulling === true;
      },
      { message: "the dispatcher to know both destinations" },
    );

    const send = steps[2]!.map((a) => (a === "<the write key>" ? writeKey! : a));
    const sent = await cli(send, cliEnv);
    expect(sent.code, sent.out).toBe(0);
    const messageId = /message id (\S+)/.exec(sent.out)?.[1];

    const [req] = await receiver.waitFor(1, 20_000);
    expect(req!.headers["idempotency-key"]).toBe(messageId);
    expect(JSON.parse(req!.body.toString())).toMatchObject({ type: "track", event: "Signed Up" });
    expect(req!.headers["x-signature"]).toBe(createHmac("sha1", "s3cret").update(req!.body).digest("hex"));
    // The demo receiver printed it, with its signature verified.
    await until(
      () =>
        lines.some(
          (l) => l.startsWith("[receiver] POST /webhook (signature ok)") && l.includes('"Signed Up"'),
        ),
      { message: "the demo receiver's line" },
    );

    // A destination that fails: one readable line per failed attempt, never raw JSON.
    const failing = await Receiver.http();
    try {
      failing.respond = () => ({ status: 500, body: "upstream is down:\n  try later" });
      const bad = await cli(
        [
          "destinations",
          "create",
          "--id",
          "bad-hook",
          "--name",
          "bad",
          "--source",
          sourceId,
          "--url",
          failing.url(),
        ],
        cliEnv,
      );
      expect(bad.code, bad.out).toBe(0);
      await until(
        async () => {
          const res = await fetch(`http://${dispatcherOps}/readyz`);
          return ((await res.json()) as { enabled?: number }).enabled === 3;
        },
        { message: "the dispatcher to know the failing destination" },
      );
      expect((await cli(send, cliEnv)).code).toBe(0);
      const failed = await until(() => lines.find((l) => l.startsWith("✗ bad-hook ")), {
        message: "a line for the failed attempt",
      });
      expect(failed).toMatch(
        new RegExp(
          `^✗ bad-hook ${new URL(failing.url()).origin.replaceAll(".", "\\.")} 500 \\(attempt 1, next in \\d+ (ms|s)\\): upstream is down: try later$`,
        ),
      );
      // The two good destinations got it: a summary line, not one per delivery.
      await until(() => lines.some((l) => /^✓ \d+ delivered in the last \d+ s/.test(l)), {
        timeout: 30_000,
        message: "the deliveries' summary",
      });
      expect(lines.filter((l) => /^\[(ingest|dispatcher)\] \{/.test(l))).toEqual([]);
      expect((await cli(["destinations", "delete", "bad-hook"], cliEnv)).code).toBe(0);
    } finally {
      await failing.close();
    }

    // Ctrl-C: SIGINT to the whole foreground process group (npm, tsx, the launcher).
    const natsPid = Number(
      /nats-server_(\d+)\.ports/.exec((await readdir(join(natsData!, "ports"))).join(" "))?.[1] ?? Number.NaN,
    );
    expect(natsPid).toBeGreaterThan(0);
    const running = await processesMentioning(dir);
    expect(running.some((p) => p.pid === natsPid)).toBe(true);
    expect(running.filter((p) => p.cmd.includes("services/api/main.ts"))).toHaveLength(1);
    expect(running.filter((p) => p.cmd.includes("services/dispatcher/main.ts"))).toHaveLength(1);

    await pressCtrlC(proc);
    expect(() => process.kill(natsPid, 0)).toThrow();
  });

  it("restarted on the same data, it does not tell you to create the demo source again", async () => {
    lines.length = 0;
    const keyFile = join(dir, ".data", "secrets-keys");
    const key = await readFile(keyFile, "utf8");
    const proc = await npmStart();
    // The same key, kept: the secrets stored on the first run are read with it.
    expect(printed(/^ {2}secrets key\s+(.+)$/)[1]).toBe(keyFile);
    expect(await readFile(keyFile, "utf8")).toBe(key);
    expect(
      lines.some((l) => l.startsWith("Welcome back: the demo source and destination are still here.")),
    ).toBe(true);
    const steps = lines
      .filter((l) => l.startsWith("  npx hookpost "))
      .map((l) => words(l).slice(2, 4).join(" "));
    expect(steps).toEqual(["sources rotate-key", "send track"]);
    await pressCtrlC(proc);
  });
});
