/**
 * Vitest global setup: builds the web console (dist/console) when it is missing or older than
 * its sources, so that `npm test` alone serves the current console. CI builds before testing.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const built = join(root, "dist/console/index.html");

/** The newest modification time among the console's sources and the descriptors it bundles. */
function newestSource(): number {
  const files = readdirSync(join(root, "console"), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
  files.push(join(root, "gen/hookpost/v1/admin_pb.ts"), join(root, "package-lock.json"));
  return Math.max(...files.map((f) => statSync(f).mtimeMs));
}

export default function setup(): void {
  if (existsSync(built) && statSync(built).mtimeMs >= newestSource()) return;
  execFileSync(
    process.execPath,
    [join(root, "node_modules/vite/bin/vite.js"), "build", "--config", "console/vite.config.ts"],
    { cwd: root, stdio: "inherit" },
  );
}
