/**
 * The libraries other teams install, installed the way they would: `npm pack` of
 * packages/contract, packages/client and packages/receiver (each builds itself to dist/ before it is
 * packed), the client's tarball installed in an empty folder and used from a plain ESM script to
 * send a call through a real stack, and the receiver's tarball installed alone to verify that
 * call's webhook signature. No "@hookpost/source" condition, no workspace links: only what the
 * tarballs hold and what npm installs for them.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";

const run = promisify(execFile);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SECRET = "pack-test-secret";
/** What the client (and the contract it uses) must never pull in: the server side's stack. */
const SERVER_ONLY = /^(nats|pino|undici|@opentelemetry\/.*|@hookpost\/(core|api|dispatcher|receiver|cli))$/;

/** The only dependencies the client and the contract may declare. */
const LIBRARY_DEPS = ["@hookpost/contract", "@grpc/grpc-js", "@bufbuild/protobuf"];

/** The environment of a plain Node process: none of vitest's options or conditions. */
const plainEnv = (extra: Record<string, string> = {}) => {
  const { NODE_OPTIONS: _o, VITEST: _v, ...env } = process.env;
  return { ...env, ...extra };
};

const npm = (cwd: string, args: string[]) =>
  run("npm", args, { cwd, env: plainEnv(), maxBuffer: 16 * 1024 * 1024 });

async function emptyProject(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  return dir;
}

interface LsNode {
  version?: string;
  dependencies?: Record<string, LsNode>;
}

/** Every package name in an `npm ls --all --json` tree. */
function names(tree: LsNode, into = new Set<string>()): Set<string> {
  for (const [name, node] of Object.entries(tree.dependencies ?? {})) {
    into.add(name);
    names(node, into);
  }
  return into;
}

let tmp: string;
let stack: Stack;
const tarballs: Record<"contract" | "client" | "receiver", string> = {
  contract: "",
  client: "",
  receiver: "",
};

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "hookpost-pack-"));
  const [, started] = await Promise.all([
    npm(ROOT, [
      "pack",
      "--pack-destination",
      tmp,
      "-w",
      "packages/contract",
      "-w",
      "packages/client",
      "-w",
      "packages/receiver",
    ]),
    Stack.start(),
  ]);
  stack = started;
  for (const file of await readdir(tmp)) {
    for (const name of Object.keys(tarballs) as Array<keyof typeof tarballs>) {
      if (file.startsWith(`hookpost-${name}-`) && file.endsWith(".tgz")) tarballs[name] = join(tmp, file);
    }
  }
}, 120_000);

afterAll(async () => {
  await stack?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe("packed libraries", () => {
  it("the client installs alone, sends a call that is delivered, and the receiver alone verifies it", async () => {
    expect(tarballs.contract && tarballs.client && tarballs.receiver, JSON.stringify(tarballs)).toBeTruthy();

    // The client, with the contract tarball it depends on, in an empty folder.
    const app = await emptyProject(join(tmp, "client-app"));
    await npm(app, [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      tarballs.contract,
      tarballs.client,
    ]);
    const { stdout: ls } = await npm(app, ["ls", "--all", "--json"]);
    const installed = names(JSON.parse(ls) as LsNode);
    expect(installed).toContain("@hookpost/client");
    expect(installed).toContain("@hookpost/contract");
    expect(installed).toContain("@grpc/grpc-js");
    expect(installed).toContain("@bufbuild/protobuf");
    expect([...installed].filter((n) => SERVER_ONLY.test(n))).toEqual([]);
    // What the installed client and contract ask for: each other and the gRPC/protobuf libraries only.
    for (const name of ["@hookpost/client", "@hookpost/contract"]) {
      const manifest = JSON.parse(
        await readFile(join(app, "node_modules", name, "package.json"), "utf8"),
      ) as {
        dependencies?: Record<string, string>;
      };
      const wanted = Object.keys(manifest.dependencies ?? {}).filter((d) => d !== name);
      expect(
        wanted.filter((d) => !LIBRARY_DEPS.includes(d)),
        name,
      ).toEqual([]);
    }

    // A call sent with the installed client reaches a real stack and is delivered, signed.
    const source = await stack.source("packed client");
    const destination = await stack.destination({
      name: "packed",
      sourceIds: [source.id],
      sharedSecret: SECRET,
    });
    await stack.waitForDestination(destination.id);
    await writeFile(
      join(app, "send.mjs"),
      [
        'import { Analytics } from "@hookpost/client";',
        "const analytics = new Analytics(process.env.WRITE_KEY, { endpoint: process.env.ENDPOINT });",
        'analytics.on("error", (err) => { console.error(err.code, err.message); process.exitCode = 1; });',
        'analytics.track({ userId: "packed-user", event: "Installed From Tarball" });',
        "await analytics.close();",
      ].join("\n"),
    );
    await run(process.execPath, ["send.mjs"], {
      cwd: app,
      env: plainEnv({ WRITE_KEY: source.writeKey, ENDPOINT: stack.ingest.address }),
    });
    const [delivered] = await stack.receiver.waitFor(1);
    expect(JSON.parse(delivered!.body.toString("utf8"))).toMatchObject({
      type: "track",
      userId: "packed-user",
      event: "Installed From Tarball",
    });

    // The receiver alone (no other package) verifies that webhook's signature.
    const hook = await emptyProject(join(tmp, "receiver-app"));
    await npm(hook, ["install", "--no-audit", "--no-fund", "--prefer-offline", tarballs.receiver]);
    const { stdout: hookLs } = await npm(hook, ["ls", "--all", "--json"]);
    expect([...names(JSON.parse(hookLs) as LsNode)]).toEqual(["@hookpost/receiver"]);
    await writeFile(join(hook, "body.bin"), delivered!.body);
    await writeFile(
      join(hook, "verify.mjs"),
      [
        'import { readFileSync } from "node:fs";',
        'import { verifySignature } from "@hookpost/receiver";',
        'const raw = readFileSync("body.bin");',
        "const header = process.env.SIGNATURE;",
        "console.log(JSON.stringify({",
        "  right: verifySignature(raw, header, process.env.SECRET),",
        '  wrongSecret: verifySignature(raw, header, "not-the-secret"),',
        '  changedBody: verifySignature(Buffer.concat([raw, Buffer.from(" ")]), header, process.env.SECRET),',
        "}));",
      ].join("\n"),
    );
    const signature = delivered!.headers["x-signature"];
    expect(typeof signature).toBe("string");
    const { stdout: verdict } = await run(process.execPath, ["verify.mjs"], {
      cwd: hook,
      env: plainEnv({ SIGNATURE: signature as string, SECRET }),
    });
    expect(JSON.parse(verdict)).toEqual({ right: true, wrongSecret: false, changedBody: false });
  }, 60_000);
});
