import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** README.md and every Markdown page under docs/. */
async function pages(): Promise<string[]> {
  const found = ["README.md"];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) await walk(path);
      else if (entry.name.endsWith(".md")) found.push(path);
    }
  };
  await walk("docs");
  return found;
}

/** Targets of Markdown links `[text](target)` outside code blocks and code spans. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe("documentation links", () => {
  it("README.md links every page of docs/", async () => {
    const readme = await readFile(join(ROOT, "README.md"), "utf8");
    for (const page of await pages()) {
      if (page !== "README.md") expect(readme, page).toContain(`](${page}`);
    }
  });

  it("every relative link points to an existing file", async () => {
    const broken: string[] = [];
    let checked = 0;
    for (const page of await pages()) {
      for (const target of linkTargets(await readFile(join(ROOT, page), "utf8"))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) continue;
        const path = target.split("#")[0]!;
        checked++;
        if (!existsSync(resolve(ROOT, dirname(page), path))) broken.push(`${page}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(10);
  });
});
