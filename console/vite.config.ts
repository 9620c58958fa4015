import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/** `npm run build` compiles the console into dist/console, served by the ingest at /console/. */
export default defineConfig({
  root: here("."),
  base: "/console/",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: here("../dist/console"),
    emptyOutDir: true,
    target: "es2022",
    // The strict Content-Security-Policy allows no inline script: no polyfill snippet.
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
});
