import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parseDuration } from "@hookpost/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { dockerfileStages, imageEnv } from "../helpers/dockerfile.js";
import { NatsServer } from "../helpers/nats-server.js";
import { killIfRunning } from "../helpers/service-process.js";
import { exitWithin, httpStatus, ROOT, type ServiceProcess, spawnNode } from "./helpers.js";

// docker-compose.yml and the Dockerfile, checked without a Docker engine: their settings are
// read and checked, and the image is rebuilt by hand the way the Dockerfile builds it (only what
// it copies, `tsc -p tsconfig.build.json`, then dist/ + package.json + production packages + bin/,
// without tsx) and its commands are run against a nats-server.

const run = promisify(execFile);

interface ComposeService {
  image?: string;
  build?: string | { context: string };
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
  ports?: string[];
  stop_grace_period?: string;
}
interface Compose {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

const compose = parse(await readFile(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as Compose;
const stages = dockerfileStages();
const { nats, ingest, dispatcher } = compose.services as Record<string, ComposeService>;

/** The stream settings (packages/core/src/env/topology-env.ts): every service must use the same. */
const STREAM_SETTINGS = [
  "RETRY_WINDOW",
  "RETRY_MAX_DELAY",
  "EVENTS_MAX_BYTES",
  "DELIVERIES_MAX_BYTES",
  "DEAD_LETTER_MAX_AGE",
  "DEDUP_WINDOW",
  "STREAM_REPLICAS",
];

describe("docker-compose.yml", () => {
  it("runs NATS with JetStream, its store on a named volume, and a health check", () => {
    expect(nats?.image).toMatch(/^nats:/);
    const cmd = nats!.command!;
    expect(cmd).toContain("-js");
    const store = cmd[cmd.indexOf("-sd") + 1];
    expect(store).toMatch(/^\//);
    const volume = nats!.volumes!.find((v) => v.endsWith(`:${store}`))?.split(":")[0];
    expect(volume).toBeDefined();
    expect(Object.keys(compose.volumes ?? {})).toContain(volume);
    expect(nats!.healthcheck?.test.join(" ")).toContain("/healthz");
  });

  it("runs ingest and two or more dispatcher replicas from the one image, ready-checked on their ops ports", () => {
    expect(ingest?.image).toBeDefined();
    expect(dispatcher?.image).toBe(ingest!.image);
    for (const s of [ingest!, dispatcher!]) {
      expect(s.build).toBe(".");
      expect(s.environment?.NATS_URL).toBe("nats://nats:4222");
      expect(s.depends_on?.nats?.condition).toBe("service_healthy");
    }
    expect(ingest!.command).toEqual(["node", "services/api/dist/main.js"]);
    expect(dispatcher!.command).toEqual(["node", "services/dispatcher/dist/main.js"]);
    expect(dispatcher!.deploy?.replicas).toBeGreaterThanOrEqual(2);

    expect(ingest!.environment?.INGEST_ADDR).toBe("0.0.0.0:50051");
    expect(ingest!.environment?.OPS_ADDR).toBe("0.0.0.0:9090");
    expect(ingest!.environment?.HTTP_ADDR).toBe("0.0.0.0:8080");
    expect(dispatcher!.environment?.OPS_ADDR).toBe("0.0.0.0:9091");
    expect(ingest!.healthcheck?.test.join(" ")).toContain("http://127.0.0.1:9090/readyz");
    expect(dispatcher!.healthcheck?.test.join(" ")).toContain("http://127.0.0.1:9091/readyz");
    expect(ingest!.environment?.ADMIN_TOKEN).toMatch(/^\$\{ADMIN_TOKEN:\?/);
  });

  it("sets the stream settings alike on every service, and leaves a dispatcher time to drain", () => {
    for (const key of STREAM_SETTINGS) {
      expect(ingest!.environment?.[key], key).toBe(dispatcher!.environment?.[key]);
    }
    expect(ingest!.environment?.RETRY_MAX_DELAY).toBeDefined();
    // SHUTDOWN_GRACE (10s) and the open pulls (PULL_EXPIRES, 5s) fit in the stop grace period.
    for (const s of [ingest!, dispatcher!]) {
      expect(parseDuration(s.stop_grace_period ?? "10s")).toBeGreaterThanOrEqual(15_000);
    }
  });
});

/**
 * The variables docs/configuration.md's settings tables document, per table: "Shared by ingest and
 * dispatcher", "Ingest (…)", "Dispatcher (…)". A cell may name several (`TLS_CERT_FILE`, `TLS_KEY_FILE`).
 */
function documentedVariables(readme: string): Record<"shared" | "ingest" | "dispatcher", string[]> {
  const start = readme.indexOf("## Settings");
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const tableAfter = (title: string) => {
    const start = section.indexOf(title);
    expect(start, title).toBeGreaterThanOrEqual(0);
    const names: string[] = [];
    for (const line of section.slice(start).split("\n").slice(1)) {
      if (line.trim() === "") {
        if (names.length > 0) break;
        continue;
      }
      if (!line.startsWith("|")) break;
      const first = line.split("|")[1] ?? "";
      for (const m of first.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) names.push(m[1]!);
    }
    return names;
  };
  return {
    shared: tableAfter("Shared by ingest and dispatcher"),
    ingest: tableAfter("Ingest (`npm run ingest`)"),
    dispatcher: tableAfter("Dispatcher (`npm run dispatcher`)"),
  };
}

describe("docker-compose.yml against the README", () => {
  it("passes every documented variable of a service through to it", async () => {
    const vars = documentedVariables(await readFile(join(ROOT, "docs/configuration.md"), "utf8"));
    expect(vars.shared).toEqual(expect.arrayContaining([...STREAM_SETTINGS, "NATS_URL", "LOG_LEVEL"]));
    expect(vars.dispatcher).toEqual(expect.arrayContaining(["WEBHOOK_TIMEOUT", "SHUTDOWN_GRACE"]));
    const missing = (s: ComposeService, names: string[]) =>
      names.filter((n) => !(n in (s.environment ?? {})));
    expect(missing(ingest!, [...vars.shared, ...vars.ingest])).toEqual([]);
    expect(missing(dispatcher!, [...vars.shared, ...vars.dispatcher])).toEqual([]);
    // Passed through from the shell, not hard-wired (NATS_URL and the listen addresses excepted).
    for (const s of [ingest!, dispatcher!]) {
      for (const [k, v] of Object.entries(s.environment ?? {})) {
        if (["NATS_URL", "OPS_ADDR", "INGEST_ADDR", "HTTP_ADDR"].includes(k)) continue;
        expect(v, k).toMatch(new RegExp(`^\\$\\{${k}(:-|:\\?)`));
      }
    }
  });

  it("publishes NATS on this machine only, on 4222 (what `npm start`'s hint uses)", () => {
    expect(nats!.ports).toEqual(["127.0.0.1:4222:4222"]);
  });
});

describe("Dockerfile", () => {
  it("is multi-stage, on a supported LTS Node, and runs as a non-root user", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) {
      const image = /^FROM\s+(\S+)/i.exec(stage[0]!)![1]!;
      const major = Number(/^node:(\d+)/.exec(image)?.[1]);
      // An even major is an LTS line; 20 reached its end of life in April 2026.
      expect(major % 2, image).toBe(0);
      expect(major, image).toBeGreaterThanOrEqual(24);
    }
    const last = stages.at(-1)!;
    const user = last.find((l) => /^USER\s/i.test(l))?.split(/\s+/)[1];
    expect(user).toBeDefined();
    expect(["root", "0"]).not.toContain(user);
    expect(last.some((l) => /^CMD\s/i.test(l))).toBe(true);
  });

  it("copies every workspace the build compiles, and .dockerignore keeps none of it out", async () => {
    const root = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { workspaces: string[] };
    const copied = buildStageSources();
    for (const ws of root.workspaces)
      expect(
        copied.some((c) => ws === c || ws.startsWith(`${c}/`)),
        ws,
      ).toBe(true);
    for (const f of ["package.json", "package-lock.json", "tsconfig.json"]) {
      expect(copied).toContain(f);
    }
    const ignored = (await readFile(join(ROOT, ".dockerignore"), "utf8")).split("\n").map((l) => l.trim());
    for (const p of [...copied, "bin"]) expect(ignored, p).not.toContain(p);
  });
});

/** What the first (build) stage copies from the context, e.g. ["package.json", "gen", …]. */
function buildStageSources(): string[] {
  const out: string[] = [];
  for (const line of stages[0]!) {
    const m = /^COPY\s+(?!--from)(.+)$/i.exec(line);
    if (!m) continue;
    const parts = m[1]!.trim().split(/\s+/);
    out.push(...parts.slice(0, -1).map((p) => p.replace(/^\.\//, "").replace(/\/$/, "")));
  }
  return out;
}

describe("the image's build, by hand", () => {
  let work: string;
  let natsServer: NatsServer;
  const procs: ServiceProcess[] = [];

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "hookpost-image-"));
    natsServer = await NatsServer.start();
  });

  afterAll(async () => {
    for (const p of procs) killIfRunning(p.proc);
    await natsServer?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  // tsc, then vite, then two services: minutes on a loaded 2-core machine.
  it("builds from what the Dockerfile copies, and the built services and CLI run without tsx", async () => {
    // Build stage: only the copied sources, every package (npm ci), `npm run build`.
    const buildDir = join(work, "build");
    await mkdir(buildDir);
    // Without the generated protobuf code, as a clean clone holds them (npm ci generates it).
    for (const src of buildStageSources())
      await cp(join(ROOT, src), join(buildDir, src), {
        recursive: true,
        filter: (s) => !s.endsWith(join("packages", "contract", "src", "gen")),
      });
    const pkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as {
      version: string;
      scripts: Record<string, string>;
      devDependencies: Record<string, string>;
      workspaces: string[];
    };
    // The workspaces as npm ci links them: @hookpost/<name> -> this copy's folder.
    const workspaces = await workspaceDirs(buildDir, pkg.workspaces);
    await linkPackages(join(buildDir, "node_modules"), [], workspaces);
    // npm ci's prepare script: the protobuf code from the copied proto/ (buf and its plugin from .bin).
    expect(pkg.scripts.prepare).toBe("buf generate");
    const bin = join(ROOT, "node_modules/.bin");
    await run(join(bin, "buf"), ["generate"], {
      cwd: buildDir,
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
    expect(pkg.scripts.build).toBe("npm run build --workspaces --if-present");
    // `npm run build`: each workspace in the listed order (a package after those it imports).
    for (const ws of pkg.workspaces) {
      const wsPkg = JSON.parse(await readFile(join(buildDir, ws, "package.json"), "utf8")) as {
        scripts?: Record<string, string>;
      };
      const build = wsPkg.scripts?.build;
      if (build === "tsc -p tsconfig.build.json")
        await run(
          process.execPath,
          [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"],
          {
            cwd: join(buildDir, ws),
          },
        );
      else if (build === "vite build --config vite.config.ts")
        await run(
          process.execPath,
          [join(ROOT, "node_modules/vite/bin/vite.js"), "build", "--config", "vite.config.ts"],
          {
            cwd: join(buildDir, ws),
          },
        );
      else expect(build, ws).toBeUndefined();
    }

    // Runtime stage: package.json, dist/, bin/ and the production packages, here without tsx.
    const app = join(work, "app");
    await mkdir(app);
    await cp(join(buildDir, "package.json"), join(app, "package.json"));
    for (const dir of ["packages", "services"])
      await cp(join(buildDir, dir), join(app, dir), {
        recursive: true,
        filter: (s) => !s.endsWith("/node_modules"),
      });
    // What `npm prune --omit=dev` removes: dev dependencies that no workspace needs in production.
    const devDeps = new Set([...Object.keys(pkg.devDependencies), "tsx"]);
    const prodDeps = new Set<string>();
    for (const ws of pkg.workspaces) {
      const wsPkg = JSON.parse(await readFile(join(app, ws, "package.json"), "utf8")) as {
        dependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
      };
      for (const d of Object.keys(wsPkg.devDependencies ?? {})) devDeps.add(d);
      for (const d of Object.keys(wsPkg.dependencies ?? {})) prodDeps.add(d);
    }
    const devOnly = [...devDeps].filter((d) => d === "tsx" || !prodDeps.has(d));
    await linkPackages(join(app, "node_modules"), devOnly, await workspaceDirs(app, pkg.workspaces));
    for (const cmd of [ingest!.command!, dispatcher!.command!])
      expect(existsSync(join(app, cmd[1]!))).toBe(true);

    // The image's ENV too (NODE_ENV, NODE_OPTIONS): the services must start with them.
    const env = { ...imageEnv(), NATS_URL: natsServer.url, OPS_ADDR: "127.0.0.1:0", LOG_LEVEL: "info" };
    expect(Object.keys(imageEnv())).toContain("NODE_OPTIONS");
    const ing = spawnNode(
      ingest!.command!.slice(1),
      { ...env, INGEST_ADDR: "127.0.0.1:0", HTTP_ADDR: "127.0.0.1:0", ADMIN_TOKEN: "t0ken" },
      app,
    );
    const disp = spawnNode(dispatcher!.command!.slice(1), env, app);
    procs.push(ing, disp);
    const listening = await ing.waitFor("ingest listening");
    const started = await disp.waitFor("dispatcher started");
    for (const [svc, ops] of [
      [ingest!, String(listening.ops)],
      [dispatcher!, String(started.ops)],
    ] as const) {
      expect(await httpStatus(`http://${ops}/readyz`)).toBe(200);
      // The compose health check itself, pointed at this port.
      const [, ...check] = svc.healthcheck!.test;
      expect(check[0]).toBe("node");
      const script = check.at(-1)!.replace(/127\.0\.0\.1:\d+/, ops);
      await run(process.execPath, [...check.slice(1, -1), script], { cwd: app });
    }

    // The web console, found in dist/console beside the compiled service.
    const page = await fetch(`http://${String(listening.http)}/console/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<div id="app">');

    // The built CLI (packages/cli/dist) and the client library's version lookup.
    const cliEnv: NodeJS.ProcessEnv = {
      ...process.env,
      HOOKPOST_ENDPOINT: String(listening.address),
      ADMIN_TOKEN: "t0ken",
    };
    delete cliEnv.HOOKPOST_CLI_FROM_SOURCE;
    const version = await run(process.execPath, ["packages/cli/bin/hookpost.js", "--version"], {
      cwd: app,
      env: cliEnv,
    });
    expect(version.stdout.trim()).toBe(pkg.version);
    const created = await run(
      process.execPath,
      ["packages/cli/bin/hookpost.js", "--json", "sources", "create", "Web"],
      {
        cwd: app,
        env: cliEnv,
      },
    );
    expect(JSON.parse(created.stdout)).toMatchObject({ source: { name: "Web" } });
    const lib = await run(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        "const c = await import('@hookpost/client'); await import('@hookpost/receiver'); console.log(JSON.stringify(c.LIBRARY))",
      ],
      { cwd: app },
    );
    expect(JSON.parse(lib.stdout)).toEqual({ name: "hookpost", version: pkg.version });

    ing.proc.kill("SIGTERM");
    disp.proc.kill("SIGTERM");
    expect(await exitWithin(ing, 20_000)).toBe(0);
    expect(await exitWithin(disp, 20_000)).toBe(0);
  }, 240_000);
});

/** Package name -> folder of each workspace under `root`. */
async function workspaceDirs(root: string, workspaces: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const ws of workspaces) {
    const { name } = JSON.parse(await readFile(join(root, ws, "package.json"), "utf8")) as { name: string };
    out.set(name, join(root, ws));
  }
  return out;
}

/**
 * A node_modules of links to the repo's packages, leaving out `without` (names, scoped or not);
 * the workspaces link to the folders given (as npm links them), not to the repo's.
 */
async function linkPackages(
  dir: string,
  without: string[],
  workspaces = new Map<string, string>(),
): Promise<void> {
  const from = join(ROOT, "node_modules");
  await mkdir(dir);
  for (const name of await readdir(from)) {
    if (name === ".bin") continue;
    if (name.startsWith("@")) {
      await mkdir(join(dir, name));
      for (const sub of await readdir(join(from, name))) {
        const ws = workspaces.get(`${name}/${sub}`);
        if (ws) await symlink(ws, join(dir, name, sub), "dir");
        else if (!without.includes(`${name}/${sub}`))
          await symlink(join(from, name, sub), join(dir, name, sub), "dir");
      }
    } else if (!without.includes(name)) {
      await symlink(join(from, name), join(dir, name), "dir");
    }
  }
}
