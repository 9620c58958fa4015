import {
  ADMIN_PAGE_MAX_BYTES,
  PageBudget,
  type PageLimit,
  pageSize,
  pageSizeViolation,
} from "@hookpost/contract";
import { throwIfInvalid } from "../invalid.js";

export interface PageRequest {
  pageSize: number;
  pageToken: string;
}

/** Something listed oldest first: creation time, then id for records created the same moment. */
interface Created {
  id: string;
  createdAt: string;
}

const keyOf = (r: Created) => `${r.createdAt}\n${r.id}`;

/**
 * One page of an in-memory list (sources, destinations), oldest first. The token is the last
 * record's position (creation time and id), so records created or deleted between pages neither
 * repeat nor shift the rest. `bytes` is what a record adds to the answer; the page stops at the
 * size asked for or ADMIN_PAGE_MAX_BYTES, whichever comes first.
 */
export function pageOf<T extends Created>(
  all: readonly T[],
  req: PageRequest,
  limit: PageLimit,
  bytes: (r: T) => number,
): { page: T[]; nextPageToken: string } {
  const size = pageSize(req.pageSize, limit);
  const after = req.pageToken === "" ? "" : decodeToken(req.pageToken);
  throwIfInvalid([
    ...(size === undefined ? [pageSizeViolation(limit)] : []),
    ...(after === undefined
      ? [{ field: "page_token", description: "is not a token from a previous response" }]
      : []),
  ]);
  const sorted = [...all].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  const budget = new PageBudget(ADMIN_PAGE_MAX_BYTES);
  const page: T[] = [];
  for (const r of sorted) {
    if (after && keyOf(r) <= after) continue;
    const b = bytes(r);
    if (page.length === size || !budget.fits(b)) return { page, nextPageToken: encodeToken(page.at(-1)!) };
    budget.add(b);
    page.push(r);
  }
  return { page, nextPageToken: "" };
}

function encodeToken(r: Created): string {
  return Buffer.from(keyOf(r)).toString("base64url");
}

function decodeToken(token: string): string | undefined {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(token)) return undefined;
  const key = Buffer.from(token, "base64url").toString();
  return key.includes("\n") ? key : undefined;
}
