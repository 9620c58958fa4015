/**
 * Page limits of AdminService reads (gRPC and Connect share the handlers). Every list answers at
 * most `max` records and stops at ADMIN_PAGE_MAX_BYTES with a next-page token, so an answer stays
 * far below the 4 MiB a default gRPC client accepts whatever is stored.
 */

/** A page stops filling once its records reach this size (a first record always fits). */
export const ADMIN_PAGE_MAX_BYTES = 1024 * 1024;

export interface PageLimit {
  /** Used when the request's page_size is 0. */
  default: number;
  max: number;
}

export const ADMIN_PAGES = {
  attempts: { default: 50, max: 1000 },
  deadLetters: { default: 100, max: 1000 },
  sources: { default: 100, max: 1000 },
  destinations: { default: 100, max: 1000 },
  destinationHealth: { default: 100, max: 1000 },
  auditRecords: { default: 100, max: 1000 },
  portalLinks: { default: 100, max: 1000 },
} as const satisfies Record<string, PageLimit>;

/** The page size a request asks for, or undefined when out of range (a field violation). */
export function pageSize(requested: number, limit: PageLimit): number | undefined {
  if (!Number.isInteger(requested) || requested < 0 || requested > limit.max) return undefined;
  return requested === 0 ? limit.default : requested;
}

export function pageSizeViolation(limit: PageLimit): { field: string; description: string } {
  return {
    field: "page_size",
    description: `must be between 0 (default ${limit.default}) and ${limit.max}`,
  };
}

/**
 * Bytes a record adds to an answer: its strings (UTF-8) plus a flat allowance for numbers, times
 * and framing. An estimate that never undercounts bodies, which are what make answers large.
 */
export function answerBytes(...strings: readonly string[]): number {
  let n = 64;
  for (const s of strings) n += utf8Length(s) + 4;
  return n;
}

/** UTF-8 length without encoding (no Buffer: the console imports this file too). */
function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // 2 bytes up to U+07FF, 3 beyond; a surrogate pair is 4 bytes over its 2 units.
    if (c >= 0x80) n += c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 1 : 2;
  }
  return n;
}

/** Counts a page's bytes: `fits` says whether one more record of `bytes` may still be added. */
export class PageBudget {
  #used = 0;
  #count = 0;
  readonly #maxBytes: number;

  constructor(maxBytes = ADMIN_PAGE_MAX_BYTES) {
    this.#maxBytes = maxBytes;
  }

  /** The first record always fits, so that every page makes progress. */
  fits(bytes: number): boolean {
    return this.#count === 0 || this.#used + bytes <= this.#maxBytes;
  }

  add(bytes: number): void {
    this.#used += bytes;
    this.#count++;
  }

  get used(): number {
    return this.#used;
  }
}

/**
 * Every page of a paged list, for callers that show everything (CLI, console). `fetch` gets the
 * token of the page to read ("" first) and answers the page's items and the next token.
 */
export async function allPages<T>(
  fetch: (pageToken: string) => Promise<{ items: T[]; nextPageToken: string }>,
): Promise<T[]> {
  const out: T[] = [];
  let token = "";
  do {
    const page = await fetch(token);
    out.push(...page.items);
    token = page.nextPageToken;
  } while (token !== "");
  return out;
}
