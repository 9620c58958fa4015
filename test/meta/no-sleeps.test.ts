import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Tests wait on facts (test/helpers/until.ts), never for a fixed time. A timer that is the
// behaviour under test (nothing arrives during N ms, a load generator's pace, an endpoint that
// answers late, a deadline asserted) says so with `// not a wait: why` on its line or the line above.
const TEST_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TIMER = /\b(sleep|setTimeout|setInterval|delay|waitForTimeout)\s*\(/;
const MARKER = "// not a wait:";
// The one place that polls.
const POLLER = join("helpers", "until.ts");

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" || e.name === "fixtures" ? [] : tsFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/** Lines (file:line: text) that start a timer without the marker. */
function unmarkedTimers(file: string, text: string): string[] {
  const lines = text.split("\n");
  const found: string[] = [];
  lines.forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, "");
    if (!TIMER.test(code) || /^\s*import\b/.test(line)) return;
    if (line.includes(MARKER) || lines[i - 1]?.includes(MARKER)) return;
    found.push(`${file}:${i + 1}: ${line.trim()}`);
  });
  return found;
}

describe("no fixed sleeps in tests", () => {
  it("finds unmarked timers (and accepts marked ones)", () => {
    const src = [
      "await sleep(100);",
      "await new Promise((r) => setTimeout(r, 50));",
      "await sleep(600); // not a wait: nothing arrives meanwhile",
      "// not a wait: paces the load generator",
      "await sleep(o.paceMs);",
      'import { setTimeout as sleep } from "node:timers/promises";',
    ].join("\n");
    expect(unmarkedTimers("x.ts", src)).toEqual([
      "x.ts:1: await sleep(100);",
      "x.ts:2: await new Promise((r) => setTimeout(r, 50));",
    ]);
  });

  it("every timer under test/ is a wait on a fact or marked `// not a wait: ...`", () => {
    const self = fileURLToPath(import.meta.url);
    const offenders = tsFiles(TEST_DIR)
      .filter((f) => f !== self && relative(TEST_DIR, f) !== POLLER)
      .flatMap((f) => unmarkedTimers(relative(TEST_DIR, f), readFileSync(f, "utf8")));
    expect(offenders, `fixed sleeps: wait with until() on the fact, or mark "${MARKER} why"`).toEqual([]);
  });
});
