import type { FieldViolation } from "@hookpost/contract";

/**
 * The sequence a log's page token names: the page ends before it ("" is the first page,
 * undefined). A token no response gave adds a page_token violation to `violations`, so the
 * caller throws it together with the request's other ones.
 */
export function beforeSequence(pageToken: string, violations: FieldViolation[]): number | undefined {
  const before = pageToken === "" ? undefined : Number(pageToken);
  if (before !== undefined && (!/^\d{1,16}$/.test(pageToken) || before < 1)) {
    violations.push({ field: "page_token", description: "is not a token from a previous response" });
  }
  return before;
}
