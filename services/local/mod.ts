/** The public entry point of @hookpost/local: what other packages may import. */
export { buildConsoleIfStale } from "./console-build.js";
export { deliveredCounts, deliveredLine, summarizeDeliveries } from "./delivered-summary.js";
export { CONFIGURATION_DOC, withSettingsSection } from "./docs-config.js";
export { duration, humanLine } from "./log-lines.js";
