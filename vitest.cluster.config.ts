import { defineConfig } from "vitest/config";

// `npm run test:cluster`: Hookpost on a 3-node JetStream cluster. Each file starts three
// nats-servers and several service processes, so files run one at a time.
export default defineConfig({
  // Workspace packages from their TypeScript sources (the "@hookpost/source" condition of their exports).
  resolve: { conditions: ["@hookpost/source"] },
  ssr: { resolve: { conditions: ["@hookpost/source"] } },
  test: {
    include: ["test/cluster/**/*.test.ts"],
    // The frozen-node test may wait 4 minutes for a cluster that lost a stream's leader to settle.
    testTimeout: 420_000,
    hookTimeout: 120_000,
    maxWorkers: 1,
    fileParallelism: false,
    reporters: ["default"],
    pool: "forks",
  },
});
