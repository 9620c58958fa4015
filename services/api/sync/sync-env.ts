import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, envDuration, envInt, envString } from "@hookpost/core";
import { type SyncLimits, syncReserveBytes } from "./sync-limiter.js";

type Env = Record<string, string | undefined>;

const MIB = 1024 * 1024;

export const DEFAULT_SYNC_LIMITS: SyncLimits = {
  maxConcurrent: 16,
  maxPerSource: 4,
  runBytes: 4 * MIB,
  memoryBytes: 512 * MIB,
  idleTimeoutMs: 60_000,
  tmpDir: join(tmpdir(), "hookpost-sync"),
};

/** The sync limits from SYNC_* variables (README "Limits"). */
export function syncLimitsFromEnv(env: Env): SyncLimits {
  const d = DEFAULT_SYNC_LIMITS;
  const limits: SyncLimits = {
    maxConcurrent: envInt(env, "SYNC_MAX_CONCURRENT", d.maxConcurrent, 1),
    maxPerSource: envInt(env, "SYNC_MAX_PER_SOURCE", d.maxPerSource, 1),
    runBytes: envInt(env, "SYNC_RUN_BYTES", d.runBytes, 64 * 1024),
    memoryBytes: envInt(env, "SYNC_MEMORY_BYTES", d.memoryBytes, 1),
    idleTimeoutMs: envDuration(env, "SYNC_IDLE_TIMEOUT", d.idleTimeoutMs),
    tmpDir: envString(env, "SYNC_TMP_DIR", d.tmpDir),
  };
  const reserve = syncReserveBytes(limits.runBytes);
  if (limits.memoryBytes < reserve) {
    throw new ConfigError(
      `SYNC_MEMORY_BYTES must hold at least one sync: ${reserve} bytes with SYNC_RUN_BYTES=${limits.runBytes}`,
    );
  }
  if (limits.idleTimeoutMs < 100) throw new ConfigError("SYNC_IDLE_TIMEOUT must be at least 100ms");
  return limits;
}
