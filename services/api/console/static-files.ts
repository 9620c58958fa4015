import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join, relative, resolve, sep } from "node:path";
import { gzipSync } from "node:zlib";

/** One file of the built console, held in memory (the whole app is a few hundred KiB). */
export interface StaticFile {
  body: Buffer;
  /** Present when compressing saved something worth it. */
  gzip?: Buffer;
  type: string;
  /** Vite puts a content hash in every name under assets/: such a file never changes. */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".woff2": "font/woff2",
};
const COMPRESSIBLE = new Set([".html", ".js", ".css", ".svg", ".json", ".txt"]);

/**
 * Where `npm run build` puts the console: dist/console under the folder holding package.json
 * (found by walking up, so it works from the sources under tsx and from the compiled dist/).
 */
export function defaultConsoleDir(): string {
  // The @hookpost/console package: its build (dist/) beside its package.json.
  return join(dirname(createRequire(import.meta.url).resolve("@hookpost/console/package.json")), "dist");
}

/** Reads every file of `dir` (keys: paths relative to it, with `/`); undefined when it is not built. */
export async function loadStaticFiles(dir: string): Promise<Map<string, StaticFile> | undefined> {
  if (!existsSync(join(dir, "index.html"))) return undefined;
  const files = new Map<string, StaticFile>();
  const root = resolve(dir);
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = join(entry.parentPath, entry.name);
    const rel = relative(root, full).split(sep).join("/");
    const ext = extname(entry.name);
    const body = await readFile(full);
    const file: StaticFile = {
      body,
      type: TYPES[ext] ?? "application/octet-stream",
      immutable: rel.startsWith("assets/"),
    };
    if (COMPRESSIBLE.has(ext) && body.length > 512) {
      const gz = gzipSync(body, { level: 9 });
      if (gz.length < body.length * 0.9) file.gzip = gz;
    }
    files.set(rel, file);
  }
  return files;
}
