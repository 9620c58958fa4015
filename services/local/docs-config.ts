/**
 * `npm run docs:config`: writes docs/configuration.md's `## Settings` section from the
 * configuration schema (packages/core/src/config/schema.ts). test/config/schema-docs.test.ts
 * fails when the file differs from what the schema renders.
 */
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { renderSettingsDocs } from "@hookpost/core";

/** `text` with its `## Settings` section (up to the next `## ` heading) replaced, or appended. */
export function withSettingsSection(text: string, section: string): string {
  const start = text.indexOf("## Settings\n");
  if (start < 0) return `${text.trimEnd()}\n\n${section}`;
  const next = text.indexOf("\n## ", start + 1);
  return `${text.slice(0, start)}${section}${next < 0 ? "" : `\n${text.slice(next + 1)}`}`;
}

export const CONFIGURATION_DOC = join(
  resolve(dirname(fileURLToPath(import.meta.url)), "../.."),
  "docs/configuration.md",
);

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const current = existsSync(CONFIGURATION_DOC)
    ? await readFile(CONFIGURATION_DOC, "utf8")
    : "# Configuration\n\nHookpost is configured by environment variables, one schema for all services.\n";
  await writeFile(CONFIGURATION_DOC, withSettingsSection(current, renderSettingsDocs()));
  process.stdout.write(`wrote ${CONFIGURATION_DOC}\n`);
}
