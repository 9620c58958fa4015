#!/usr/bin/env node
// Launcher of the `hookpost` CLI. Runs the built code (dist/, from `npm run build`) when there is
// some and neither the CLI's TypeScript sources nor those of the workspace packages it uses
// (contract, client) are newer than their builds; otherwise runs the sources through tsx.
// HOOKPOST_CLI_FROM_SOURCE=1 forces the sources.
import { existsSync, readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const built = new URL("../dist/main.js", import.meta.url);

/** Newest modification time of the .ts files under `dir` (0 when there are none). */
function newestSource(dir) {
  let newest = 0;
  if (!existsSync(dir)) return newest;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith(".ts")) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** Whether a package's build is older than its sources (never, when its sources are not here: installed). */
function stale(pkg, entry) {
  const sources = newestSource(fileURLToPath(new URL("src/", pkg)));
  if (sources === 0) return false;
  const dist = fileURLToPath(new URL(`dist/${entry}`, pkg));
  return !existsSync(dist) || statSync(dist).mtimeMs < sources;
}

const useBuilt =
  process.env.HOOKPOST_CLI_FROM_SOURCE !== "1" &&
  existsSync(built) &&
  !stale(new URL("../", import.meta.url), "main.js") &&
  // In the repository, its workspace neighbours: a stale build of either would run old rules.
  !stale(new URL("../../contract/", import.meta.url), "mod.js") &&
  !stale(new URL("../../client/", import.meta.url), "mod.js");

// grpc-js sets the TLS server name even for IP endpoints; Node's deprecation notice about that
// (DEP0123) is noise to an operator.
process.noDeprecation = true;

let cli;
if (useBuilt) {
  cli = await import(built.href);
} else {
  const { register } = await import("tsx/esm/api");
  // The other workspace packages from their sources too (the "@hookpost/source" export condition).
  const { register: registerHooks } = await import("node:module");
  registerHooks(
    "data:text/javascript,export async function resolve(s, c, next) { return next(s, { ...c, conditions: [...c.conditions, '@hookpost/source'] }); }",
  );
  register();
  cli = await import("../src/main.ts");
}
process.exitCode = await cli.runCli(process.argv.slice(2));
