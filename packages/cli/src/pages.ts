import { allPages } from "@hookpost/contract";

/**
 * Every item of a paged List RPC (the CLI shows whole lists, never one page): `list` is called
 * with each page token in turn, `items` picks the answer's repeated field.
 */
export function everyItem<R extends { nextPageToken: string }, T>(
  list: (pageToken: string) => Promise<R>,
  items: (answer: R) => T[],
): Promise<T[]> {
  return allPages(async (pageToken) => {
    const answer = await list(pageToken);
    return { items: items(answer), nextPageToken: answer.nextPageToken };
  });
}
