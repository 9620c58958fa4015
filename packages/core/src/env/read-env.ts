import { parseDuration } from "@hookpost/contract";

/** A configuration error: the service refuses to start and says which variable is wrong. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type Env = Record<string, string | undefined>;

export function envString(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v === "" ? fallback : v;
}

export function envOptional(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === "" ? undefined : v;
}

export function envInt(env: Env, name: string, fallback: number, min = 0): number {
  const v = envOptional(env, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new ConfigError(`${name} must be an integer >= ${min}, got "${v}"`);
  return n;
}

export function envDuration(env: Env, name: string, fallbackMs: number): number {
  const v = envOptional(env, name);
  if (v === undefined) return fallbackMs;
  try {
    return parseDuration(v);
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message}`);
  }
}

/** A duration, or `off` (undefined). */
export function envDurationOrOff(env: Env, name: string, fallbackMs: number): number | undefined {
  return envOptional(env, name)?.trim().toLowerCase() === "off"
    ? undefined
    : envDuration(env, name, fallbackMs);
}

export function envList(env: Env, name: string): string[] {
  const v = envOptional(env, name);
  return v === undefined
    ? []
    : v
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
}

export function envBool(env: Env, name: string, fallback: boolean): boolean {
  const v = envOptional(env, name)?.toLowerCase();
  if (v === undefined) return fallback;
  if (v === "true" || v === "1") return true;
  if (v === "false" || v === "0") return false;
  throw new ConfigError(`${name} must be true or false, got "${v}"`);
}

/** `on`/`off` (also true/false, 1/0). */
export function envSwitch(env: Env, name: string, fallback: boolean): boolean {
  const v = envOptional(env, name)?.toLowerCase();
  if (v === undefined) return fallback;
  if (["on", "true", "1"].includes(v)) return true;
  if (["off", "false", "0"].includes(v)) return false;
  throw new ConfigError(`${name} must be on or off, got "${v}"`);
}
