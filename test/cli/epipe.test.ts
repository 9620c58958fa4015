import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { BIN, cliEnv } from "./run-cli.js";

// `hookpost … | head`: the reader goes away while the CLI is still writing. The CLI stops quietly
// (exit 0, nothing on stderr) instead of crashing on EPIPE with a stack trace.

// Against the real admin service (an ingest and a nats-server on loopback).
let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start({ dispatchers: 0 });
  // Far more output than a pipe buffers (64 KiB), so the writer is still busy when head exits.
  const ids = Array.from({ length: 3000 }, (_, i) => i);
  for (let i = 0; i < ids.length; i += 100) {
    await Promise.all(
      ids.slice(i, i + 100).map((n) =>
        stack.admin.createSource({
          id: `source-${String(n).padStart(5, "0")}`,
          name: `Source number ${n}`,
        }),
      ),
    );
  }
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

const env = () => cliEnv({ HOOKPOST_ENDPOINT: stack.ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN });

function settle(child: ReturnType<typeof spawn>): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve, reject) => {
    // not a wait: gives up on a CLI that hangs
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error("did not finish in 60 s"));
    }, 60_000);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

describe("piping the CLI into a reader that stops early", () => {
  it("`hookpost sources list | head -n 3` prints three lines, and the CLI exits 0 without a word", async () => {
    // bash with pipefail: the pipeline's status is the CLI's when head succeeded.
    const child = spawn(
      "bash",
      ["-c", `set -o pipefail; "${process.execPath}" "${BIN}" sources list | head -n 3`],
      { env: env(), stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const { code } = await settle(child);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout.split("\n").filter(Boolean)).toHaveLength(3);
    expect(stdout).toMatch(/^ID\s+NAME/);
  });

  it("--json output whose reader closes after the first chunk: exit 0, nothing on stderr", async () => {
    const child = spawn(process.execPath, [BIN, "--json", "sources", "list"], {
      env: env(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let first = "";
    let stderr = "";
    child.stdout!.once("data", (d: Buffer) => {
      first = d.toString();
      child.stdout!.destroy(); // the reader goes away
    });
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const { code } = await settle(child);
    expect(first.startsWith("[")).toBe(true);
    expect(stderr).toBe("");
    expect(code).toBe(0);
  });
});
