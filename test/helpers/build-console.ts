/**
 * Vitest global setup: builds the web console (dist/console) when it is missing or older than
 * its sources, so that `npm test` alone serves the current console. CI builds before testing.
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildConsoleIfStale } from "@hookpost/local";

export default function setup(): void {
  buildConsoleIfStale(resolve(dirname(fileURLToPath(import.meta.url)), "../.."));
}
