/**
 * Vitest global setup: builds the web console (dist/console) when it is missing or older than
 * its sources, so that `npm test` alone serves the current console. CI builds before testing.
 *
 * It runs in a child process: vitest loads global setup files without the "@hookpost/source"
 * export condition, so importing a workspace package here would need its dist/ built first.
 */
import { execFileSync } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export default function setup(): void {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
  const code = `import { buildConsoleIfStale } from "@hookpost/local"; buildConsoleIfStale(${JSON.stringify(root)});`;
  execFileSync(
    process.execPath,
    ["--conditions=@hookpost/source", "--import", "tsx", "--input-type=module", "-e", code],
    { cwd: root, stdio: "inherit" },
  );
}
