import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./service-process.js";

/** The Dockerfile's instructions (comments and blank lines left out), one list per stage. */
export function dockerfileStages(): string[][] {
  const stages: string[][] = [];
  for (const line of readFileSync(join(ROOT, "Dockerfile"), "utf8").split("\n")) {
    if (line.trim() === "" || line.trim().startsWith("#")) continue;
    if (/^FROM /i.test(line)) stages.push([]);
    stages.at(-1)?.push(line);
  }
  return stages;
}

/** The final stage's `ENV NAME=value` lines: the environment the image's services start with. */
export function imageEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of dockerfileStages().at(-1) ?? []) {
    const m = /^ENV\s+([A-Z_][A-Z0-9_]*)=(.*)$/i.exec(line.trim());
    if (m) env[m[1]!] = m[2]!.replace(/^"(.*)"$/, "$1");
  }
  return env;
}
