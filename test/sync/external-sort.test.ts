import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { escapeField, RunBuilder, type SortedSource, unescapeField } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "hookpost-sort-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function drain(s: SortedSource): Promise<Array<[string, string]>> {
  const out: Array<[string, string]> = [];
  for (let e = await s.next(); e; e = await s.next()) out.push([e.id, e.value]);
  await s.close();
  return out;
}

describe("external sort", () => {
  it("sorts, dedupes (last value wins) across spilled runs and merge rounds", async () => {
    const b = new RunBuilder({
      dir: await mkdtemp(join(dir, "a-")),
      maxEntries: 37,
      maxBytes: 1e9,
      fanIn: 3,
    });
    const expected = new Map<string, string>();
    let x = 12345;
    for (let i = 0; i < 2000; i++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const id = `u${x % 700}`;
      const value = String(i);
      expected.set(id, value);
      await b.add(id, value);
    }
    expect(b.spilled).toBeGreaterThan(3);
    const got = await drain(await b.finish());
    expect(got).toEqual([...expected.entries()].sort((a, c) => (a[0] < c[0] ? -1 : 1)));
  });

  it("keeps a small input in memory", async () => {
    const b = new RunBuilder({ dir, maxEntries: 100, maxBytes: 1e9 });
    for (const id of ["b", "a", "c", "a"]) await b.add(id, "");
    expect(b.spilled).toBe(0);
    expect(await drain(await b.finish())).toEqual([
      ["a", ""],
      ["b", ""],
      ["c", ""],
    ]);
  });

  it("escapes ids that would break the line format", () => {
    for (const id of ["a\nb", "tab\there", "back\\slash\\n", "cr\r", "plain", "ü\u0000"]) {
      const e = escapeField(id);
      expect(e).not.toMatch(/[\n\r\t]/);
      expect(unescapeField(e)).toBe(id);
    }
  });
});
