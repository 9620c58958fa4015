import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "@hookpost/core";
import { SYNC_TEMP_PREFIX } from "./sync-engine.js";

const FOLDER = new RegExp(`^${SYNC_TEMP_PREFIX}(\\d+)-[A-Za-z0-9]{6}$`);

/** Whether a process with this id runs (ours excepted: at start, none of its syncs run yet). */
function alive(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Creates SYNC_TMP_DIR and removes the sync folders left there by processes that are gone
 * (killed mid-sync). Folders of live processes (another ingest sharing the folder) are kept.
 * Returns how many were removed.
 */
export async function sweepSyncTemp(dir: string, log: Logger): Promise<number> {
  await mkdir(dir, { recursive: true });
  let removed = 0;
  for (const name of await readdir(dir)) {
    const m = FOLDER.exec(name);
    if (!m || alive(Number(m[1]))) continue;
    await rm(join(dir, name), { recursive: true, force: true });
    removed++;
  }
  if (removed > 0) log.info({ dir, removed }, "removed sync folders left by stopped processes");
  return removed;
}
