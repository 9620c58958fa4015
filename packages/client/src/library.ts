import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const NAME = "hookpost";

/**
 * `context.library` of every call. The version is read from the package's own package.json by
 * walking up from this file, because the relative path differs between source (client/) and the
 * build (dist/client/), and a JSON import would copy package.json into dist.
 */
export const LIBRARY: { readonly name: string; readonly version: string } = Object.freeze({
  name: NAME,
  version: findVersion(),
});

function findVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "@hookpost/client" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // No package.json here: keep walking up.
    }
    dir = dirname(dir);
  }
  return "0.0.0";
}
