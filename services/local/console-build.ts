/**
 * Builds the web console (dist/console) when it is missing or older than its sources, so that
 * `npm start` and `npm test` serve the current console without a separate `npm run build`.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** The newest modification time among the console's sources and the descriptors it bundles. */
function newestSource(root: string): number {
  const files = readdirSync(join(root, "packages/console"), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !e.parentPath.includes("/dist") && !e.parentPath.includes("/node_modules"))
    .map((e) => join(e.parentPath, e.name));
  files.push(
    join(root, "packages/contract/src/gen/hookpost/v1/admin_pb.ts"),
    join(root, "package-lock.json"),
  );
  return Math.max(...files.map((f) => statSync(f).mtimeMs));
}

/** True when it built; `stdio` "inherit" shows Vite's output, "ignore" hides it. */
export function buildConsoleIfStale(root: string, stdio: "inherit" | "ignore" = "inherit"): boolean {
  const built = join(root, "packages/console/dist/index.html");
  if (existsSync(built) && statSync(built).mtimeMs >= newestSource(root)) return false;
  execFileSync(
    process.execPath,
    [join(root, "node_modules/vite/bin/vite.js"), "build", "--config", "packages/console/vite.config.ts"],
    { cwd: root, stdio },
  );
  return true;
}
