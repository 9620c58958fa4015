/** The public entry point of @hookpost/local: what other packages may import. */
export { buildConsoleIfStale } from "./console-build.js";
export { deliveredCounts, deliveredLine, summarizeDeliveries } from "./delivered-summary.js";
export { duration, humanLine } from "./log-lines.js";
