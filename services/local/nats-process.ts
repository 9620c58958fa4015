import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** Finds nats-server on the PATH (Debian installs it in /usr/sbin, often not on a user's PATH). */
export function findNatsServer(): string | undefined {
  for (const candidate of ["nats-server", "/usr/sbin/nats-server", "/usr/local/bin/nats-server"]) {
    const r = spawnSync(candidate, ["--version"], { stdio: "ignore" });
    if (r.status === 0) return candidate;
  }
  return undefined;
}

export interface LocalNats {
  url: string;
  process: ChildProcess;
}

/** Starts nats-server with JetStream in `dataDir`, on a free loopback port. */
export async function startLocalNats(bin: string, dataDir: string): Promise<LocalNats> {
  const portsDir = join(dataDir, "ports");
  await rm(portsDir, { recursive: true, force: true });
  await mkdir(portsDir, { recursive: true });
  const proc = spawn(
    bin,
    ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", portsDir, "-js", "-sd", dataDir],
    // Own process group, like the services: the launcher stops it last, after they drained.
    { stdio: ["ignore", "ignore", "pipe"], detached: true },
  );
  let stderr = "";
  proc.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  for (let i = 0; i < 400; i++) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited: ${stderr}`);
    const file = (await readdir(portsDir)).find((f) => f.endsWith(".ports"));
    const text = file ? await readFile(join(portsDir, file), "utf8").catch(() => "") : "";
    if (text) {
      const ports = JSON.parse(text) as { nats?: string[]; client?: string[] };
      return { url: (ports.client ?? ports.nats)![0]!, process: proc };
    }
    await sleep(25);
  }
  proc.kill();
  throw new Error(`nats-server did not start: ${stderr}`);
}
