/**
 * `npm start`: the whole system on one machine for trying Hookpost. Starts nats-server
 * (when NATS_URL is unset), ingest, one dispatcher and a demo webhook receiver, prints
 * where everything listens and the commands to send a first event; Ctrl-C stops it all.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { adminMetadata, createClient } from "@hookpost/client";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  ConfigError,
  loadSettings,
  newSecretKeyEntry,
  processEnvironment,
  splitHostPort,
} from "@hookpost/core";
import { buildConsoleIfStale } from "./console-build.js";
import { summarizeDeliveries } from "./delivered-summary.js";
import { DEMO_SECRET, startDemoReceiver } from "./demo-receiver.js";
import { humanLine } from "./log-lines.js";
import { findNatsServer, type LocalNats, startLocalNats } from "./nats-process.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
// `npm start`'s settings, read once through the schema (packages/core/src/config/schema.ts).
const env = processEnvironment();
const settings = (() => {
  try {
    return loadSettings("local", env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
})();
const dataDir = resolve(root, settings.HOOKPOST_DATA_DIR);
const out = (line = "") => process.stdout.write(`${line}\n`);

interface Service {
  name: string;
  proc: ChildProcess;
  /** Resolves with the first log record whose msg is `waitFor`. */
  ready: Promise<Record<string, unknown>>;
}

function startService(name: string, entry: string, env: NodeJS.ProcessEnv, waitFor: string): Service {
  const proc = spawn(
    process.execPath,
    ["--conditions=@hookpost/source", "--import", "tsx", join(root, entry)],
    {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      // Own process group: Ctrl-C in the terminal signals only this launcher, which then stops the
      // services in order (a SIGINT from the terminal followed by our SIGTERM would be a "second
      // signal" to them, and they would exit without finishing their work).
      detached: true,
    },
  );
  const ready = new Promise<Record<string, unknown>>((resolveReady, reject) => {
    proc.once("exit", (code) => reject(new Error(`${name} exited with code ${code} before it was ready`)));
    for (const stream of [proc.stdout!, proc.stderr!]) {
      createInterface({ input: stream }).on("line", (line) => {
        let rec: Record<string, unknown> | undefined;
        try {
          rec = JSON.parse(line) as Record<string, unknown>;
        } catch {
          rec = undefined;
        }
        if (rec?.msg === waitFor) resolveReady(rec);
        if (settings.HOOKPOST_VERBOSE || !rec) {
          out(`[${name}] ${line}`);
        } else {
          const text = humanLine(name, rec);
          if (text !== undefined) out(text);
        }
      });
    }
  });
  return { name, proc, ready };
}

async function adminToken(): Promise<string> {
  if (settings.ADMIN_TOKEN) return settings.ADMIN_TOKEN;
  // Kept in the data folder so the token (and the CLI commands using it) survive restarts.
  const file = join(dataDir, "admin-token");
  if (existsSync(file)) return (await readFile(file, "utf8")).trim();
  const token = randomBytes(24).toString("hex");
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
  return token;
}

/**
 * The key that encrypts destinations' secrets at rest: SECRETS_KEYS or SECRETS_KEYS_FILE when set
 * (the services read them), else one generated on the first run and kept beside the NATS data,
 * readable by this user only (without it the stored secrets cannot be read).
 */
async function secretsKeyFile(): Promise<{ file: string | undefined; where: string }> {
  if (settings.SECRETS_KEYS !== undefined) return { file: undefined, where: "SECRETS_KEYS (set by you)" };
  if (settings.SECRETS_KEYS_FILE !== undefined) {
    return { file: undefined, where: `${settings.SECRETS_KEYS_FILE}   (SECRETS_KEYS_FILE, set by you)` };
  }
  const file = join(dataDir, "secrets-keys");
  if (existsSync(file)) return { file, where: file };
  const entry = newSecretKeyEntry(`local-${new Date().toISOString().slice(0, 10).replaceAll("-", "")}`);
  await writeFile(file, `${entry}\n`, { mode: 0o600, flag: "wx" });
  await chmod(file, 0o600);
  return { file, where: `${file}   (generated now: keep it with .data)` };
}

/** Every child process; they run in their own process groups, so none may outlive us. */
const children: ChildProcess[] = [];
process.on("exit", () => {
  for (const p of children) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
});
/** Stops the services in order, once they were started; before that a signal just exits. */
let stopAll: (() => void) | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => (stopAll ? stopAll() : process.exit(1)));
}

async function main(): Promise<void> {
  await mkdir(dataDir, { recursive: true });
  // The console is a static build: made here when missing or stale, so its URL works at once.
  try {
    if (buildConsoleIfStale(root, "ignore")) out("built the web console (dist/console)");
  } catch (err) {
    out(`could not build the web console (npm run build shows why): ${(err as Error).message}`);
  }
  let nats: LocalNats | undefined;
  let natsUrl = settings.NATS_URL;
  if (!natsUrl) {
    const bin = findNatsServer();
    if (!bin) {
      out("NATS_URL is not set and nats-server is not installed. Either:");
      out("  - install it:       sudo apt-get install -y nats-server   (Debian/Ubuntu), or");
      out(
        "  - run it in Docker: docker compose up -d nats   and then   NATS_URL=nats://127.0.0.1:4222 npm start",
      );
      process.exitCode = 1;
      return;
    }
    nats = await startLocalNats(bin, join(dataDir, "nats"));
    children.push(nats.process);
    natsUrl = nats.url;
  }

  const token = await adminToken();
  const secretsKey = await secretsKeyFile();
  const receiverSetting = settings.DEMO_RECEIVER_ADDR;
  const receiver =
    receiverSetting === undefined
      ? undefined
      : await (async () => {
          const { host, port } = splitHostPort(receiverSetting);
          return startDemoReceiver(host, port, (line) => out(`[receiver] ${line}`));
        })();

  const base: NodeJS.ProcessEnv = {
    ...env,
    NATS_URL: natsUrl,
    ADMIN_TOKEN: token,
    ...(secretsKey.file === undefined ? {} : { SECRETS_KEYS_FILE: secretsKey.file }),
    // Local trial: webhooks to this machine are allowed (the SSRF guard refuses them by default).
    WEBHOOK_ALLOWED_CIDRS: settings.WEBHOOK_ALLOWED_CIDRS.join(","),
  };
  const ingest = startService(
    "ingest",
    "services/api/main.ts",
    {
      ...base,
      INGEST_ADDR: settings.INGEST_ADDR,
      OPS_ADDR: settings.INGEST_OPS_ADDR ?? "off",
      HTTP_ADDR: settings.HTTP_ADDR ?? "off",
    },
    "ingest listening",
  );
  const dispatcher = startService(
    "dispatcher",
    "services/dispatcher/main.ts",
    { ...base, OPS_ADDR: settings.DISPATCHER_OPS_ADDR ?? "off" },
    "dispatcher started",
  );
  const services = [ingest, dispatcher];
  children.push(ingest.proc, dispatcher.proc);

  let stopping = false;
  const stop = async (code: number) => {
    // Signals may come twice (tsx relays the terminal's SIGINT too): one stop is enough.
    if (stopping) return;
    stopping = true;
    out("\nstopping…");
    await Promise.all(
      services.map(
        (s) =>
          new Promise<void>((done) => {
            if (s.proc.exitCode !== null || s.proc.signalCode !== null) return done();
            s.proc.once("exit", () => done());
            s.proc.kill("SIGTERM");
          }),
      ),
    );
    receiver?.server.close();
    if (nats) {
      const n = nats.process;
      await new Promise<void>((done) => {
        if (n.exitCode !== null) return done();
        n.once("exit", () => done());
        n.kill("SIGTERM");
      });
    }
    process.exit(code);
  };
  stopAll = () => void stop(0);

  let ingestRec: Record<string, unknown>;
  let dispatcherRec: Record<string, unknown>;
  try {
    [ingestRec, dispatcherRec] = await Promise.all([ingest.ready, dispatcher.ready]);
  } catch (err) {
    out(`error: ${(err as Error).message}`);
    await stop(1);
    return;
  }
  for (const s of services) {
    s.proc.once("exit", (c) => {
      if (stopping) return;
      out(`${s.name} exited (${c})`);
      void stop(1);
    });
  }

  const endpoint = String(ingestRec.address);
  const ops = ingestRec.ops ? String(ingestRec.ops) : undefined;
  const http = ingestRec.http ? String(ingestRec.http) : undefined;
  out("");
  out("Hookpost is running.");
  out(`  NATS (JetStream)   ${natsUrl}${nats ? `   (data in ${join(dataDir, "nats")})` : ""}`);
  out(`  ingest gRPC        ${endpoint}`);
  if (http) out(`  ingest HTTP        http://${http}/v1/   (Segment-compatible)`);
  if (http) out(`  web console        http://${http}/console/   (sign in with the admin token)`);
  if (ops) out(`  ingest ops         http://${ops}/healthz /readyz /metrics`);
  if (dispatcherRec.ops)
    out(`  dispatcher ops     http://${String(dispatcherRec.ops)}/healthz /readyz /metrics`);
  if (receiver)
    out(`  demo receiver      ${receiver.url}   (verifies X-Signature with secret "${DEMO_SECRET}")`);
  out(`  admin token        ${token}`);
  out(`  secrets key        ${secretsKey.where}`);
  out("");
  // A restart on the same data: the demo source (and destination) exist already.
  const existing = await demoConfig(endpoint, token);
  if (existing.source) {
    out(`Welcome back: the demo source${existing.destination ? " and destination are" : " is"} still here.`);
    out("Send an event (in another terminal, from this folder):");
  } else {
    out("Send a first event (in another terminal, from this folder):");
  }
  out(`  export HOOKPOST_ENDPOINT=${endpoint} ADMIN_TOKEN=${token}`);
  if (existing.source) {
    out(`  npx hookpost sources rotate-key demo     # only if you lost its write key: prints a new one`);
  } else {
    out(`  npx hookpost sources create "My first source" --id demo     # prints the write key once`);
  }
  if (!existing.destination) {
    out(
      `  npx hookpost destinations create --id demo-hook --name demo --source demo --url ${receiver?.url ?? "http://127.0.0.1:4000/webhook"} --secret ${DEMO_SECRET}`,
    );
  }
  out(`  npx hookpost send track --write-key <the write key> --user-id user-1 --event "Signed Up"`);
  if (http) {
    out("Or over the Segment-compatible HTTP API:");
    out(
      `  curl -u '<the write key>:' -H 'Content-Type: application/json' -d '{"userId":"user-1","event":"Signed Up"}' http://${http}/v1/track`,
    );
  }
  out("");
  out("Failed delivery attempts show here as they happen (✗), deliveries in summary (✓).");
  out("Ctrl-C stops everything.");
  if (dispatcherRec.ops) summarizeDeliveries(String(dispatcherRec.ops), out);
}

/** Whether the demo source and destination the instructions create exist already. */
async function demoConfig(
  endpoint: string,
  token: string,
): Promise<{ source: boolean; destination: boolean }> {
  const admin = createClient(AdminService, endpoint, { metadata: adminMetadata(token) });
  const exists = (p: Promise<unknown>) =>
    p.then(
      () => true,
      () => false, // NOT_FOUND, or unknown: then the first-run instructions are the safe ones
    );
  try {
    const [source, destination] = await Promise.all([
      exists(admin.getSource({ id: "demo" }, { timeoutMs: 5000 })),
      exists(admin.getDestination({ id: "demo-hook" }, { timeoutMs: 5000 })),
    ]);
    return { source, destination: source && destination };
  } finally {
    admin.close();
  }
}

main().catch((err) => {
  out(`error: ${(err as Error).message}`);
  process.exit(1);
});
