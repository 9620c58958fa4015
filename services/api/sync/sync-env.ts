import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, type Settings } from "@hookpost/core";
import { type SyncLimits, syncReserveBytes } from "./sync-limiter.js";

const MIB = 1024 * 1024;

export const DEFAULT_SYNC_LIMITS: SyncLimits = {
  maxConcurrent: 16,
  maxPerSource: 4,
  runBytes: 4 * MIB,
  memoryBytes: 512 * MIB,
  idleTimeoutMs: 60_000,
  tmpDir: join(tmpdir(), "hookpost-sync"),
};

/** The sync limits from the SYNC_* settings (docs/configuration.md). */
export function syncLimitsFrom(s: Settings): SyncLimits {
  const limits: SyncLimits = {
    maxConcurrent: s.SYNC_MAX_CONCURRENT,
    maxPerSource: s.SYNC_MAX_PER_SOURCE,
    runBytes: s.SYNC_RUN_BYTES,
    memoryBytes: s.SYNC_MEMORY_BYTES,
    idleTimeoutMs: s.SYNC_IDLE_TIMEOUT,
    tmpDir: s.SYNC_TMP_DIR ?? DEFAULT_SYNC_LIMITS.tmpDir,
  };
  const reserve = syncReserveBytes(limits.runBytes);
  if (limits.memoryBytes < reserve) {
    throw new ConfigError(
      `SYNC_MEMORY_BYTES must hold at least one sync: ${reserve} bytes with SYNC_RUN_BYTES=${limits.runBytes}`,
    );
  }
  return limits;
}
