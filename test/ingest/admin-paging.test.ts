import { pageOf } from "@hookpost/api";
import { ADMIN_PAGE_MAX_BYTES, answerBytes, HookpostError } from "@hookpost/contract";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

// Paging of in-memory lists (sources, destinations, health): every record once, in creation
// order, whatever the page size, byte budget, or records deleted between pages.

const LIMIT = { default: 3, max: 10 };
const record = (i: number, nameChars = 10) => ({
  id: `r-${String(i).padStart(3, "0")}`,
  createdAt: new Date(Date.UTC(2026, 0, 1) + Math.floor(i / 2) * 1000).toISOString(),
  name: "n".repeat(nameChars),
});
type R = ReturnType<typeof record>;
const size = (r: R) => answerBytes(r.id, r.name);

function everyPage(all: R[], pageSize: number, between?: (page: R[]) => void): R[][] {
  const pages: R[][] = [];
  let token = "";
  do {
    const p = pageOf(all, { pageSize, pageToken: token }, LIMIT, size);
    pages.push(p.page);
    between?.(p.page);
    token = p.nextPageToken;
  } while (token !== "");
  return pages;
}

describe("pageOf", () => {
  it("property: any page size lists every record once, oldest first (ties by id)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 10 }), (n, pageSize) => {
        const all = Array.from({ length: n }, (_, i) => record(i));
        const shuffled = [...all].reverse();
        const pages = everyPage(shuffled, pageSize);
        expect(pages.flat().map((r) => r.id)).toEqual(all.map((r) => r.id));
        for (const p of pages.slice(0, -1)) expect(p).toHaveLength(pageSize || LIMIT.default);
      }),
    );
  });

  it("stops a page at the byte budget and goes on from there", () => {
    // 10 records of 300 KiB: 3 fit in 1 MiB.
    const all = Array.from({ length: 10 }, (_, i) => record(i, 300 * 1024));
    const pages = everyPage(all, 10);
    expect(pages.map((p) => p.length)).toEqual([3, 3, 3, 1]);
    for (const p of pages)
      expect(p.reduce((n, r) => n + size(r), 0)).toBeLessThanOrEqual(ADMIN_PAGE_MAX_BYTES);
  });

  it("records deleted between pages neither repeat nor skip the others", () => {
    let all = Array.from({ length: 9 }, (_, i) => record(i));
    const seen: string[] = [];
    everyPage(all, 3, (page) => {
      seen.push(...page.map((r) => r.id));
      // The page's last record goes away before the next page is asked for.
      const last = page.at(-1)?.id;
      all.splice(
        all.findIndex((r) => r.id === last),
        1,
      );
      all = [...all];
    });
    expect(seen).toEqual(Array.from({ length: 9 }, (_, i) => record(i).id));
  });

  it("refuses a page size over the max and a token it did not make", () => {
    const all = [record(1)];
    expect(() => pageOf(all, { pageSize: 11, pageToken: "" }, LIMIT, size)).toThrow(HookpostError);
    expect(() => pageOf(all, { pageSize: 0, pageToken: "%%" }, LIMIT, size)).toThrow(/page_token/);
    expect(() => pageOf(all, { pageSize: -1, pageToken: "" }, LIMIT, size)).toThrow(/page_size/);
  });
});
