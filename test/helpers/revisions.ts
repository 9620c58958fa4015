import { until } from "./until.js";

/** A replica: in-process (configRevision()) or a process with an ops address (host:port, /readyz). */
export type RevisionSource = { configRevision(): number } | string;

async function appliedRevision(r: RevisionSource): Promise<number> {
  if (typeof r !== "string") return r.configRevision();
  try {
    const res = await fetch(`http://${r}/readyz`);
    const body = (await res.json()) as { configRevision?: number };
    return body.configRevision ?? 0;
  } catch {
    return 0; // not up yet, or restarting
  }
}

/**
 * Waits until every replica has applied configuration revision `revision` (what an admin write
 * returned), instead of sleeping "long enough" for a change to propagate.
 */
export async function waitForRevision(
  revision: number | bigint,
  replicas: readonly RevisionSource[],
  timeoutMs = 20_000,
): Promise<void> {
  const want = Number(revision);
  let seen: number[] = [];
  await until(
    async () => {
      seen = await Promise.all(replicas.map(appliedRevision));
      return seen.every((n) => n >= want);
    },
    { timeout: timeoutMs, interval: 20, message: `every replica to apply revision ${want}` },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; replicas applied ${seen.join(", ")}`);
  });
}
