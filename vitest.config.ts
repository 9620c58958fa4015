import { defineConfig } from "vitest/config";

export default defineConfig({
  // Workspace packages from their TypeScript sources (the "@hookpost/source" condition of their exports).
  resolve: { conditions: ["@hookpost/source"] },
  ssr: { resolve: { conditions: ["@hookpost/source"] } },
  test: {
    include: ["test/**/*.test.ts"],
    // Cluster tests have their own run: `npm run test:cluster` (vitest.cluster.config.ts).
    exclude: ["test/cluster/**", "**/node_modules/**"],
    // Builds the web console when dist/console is missing (the browser tests serve it).
    globalSetup: ["test/helpers/build-console.ts"],
    // A failing test prints what its in-process services logged at warn and above.
    setupFiles: ["test/helpers/failure-logs.ts"],
    // Every test file starts its own nats-server and services: give them room, and run
    // a few files at once (2 cores here).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    reporters: ["default"],
    pool: "forks",
  },
});
