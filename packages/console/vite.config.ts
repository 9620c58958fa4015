import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/** `npm run build` compiles the console into packages/console/dist, served by the ingest at /console/. */
export default defineConfig({
  root: here("."),
  base: "/console/",
  // Workspace packages from their sources (package.json "exports" condition).
  resolve: { conditions: ["@hookpost/source", "module", "browser", "development|production"] },
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: here("dist"),
    emptyOutDir: true,
    target: "es2022",
    // The strict Content-Security-Policy allows no inline script: no polyfill snippet.
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
});
