import { ConfigError } from "./read-env.js";

// What the usual listen failures mean, for the one line a service prints before it exits.
const REASONS: Record<string, string> = {
  EADDRINUSE: "address in use",
  EADDRNOTAVAIL: "no such address on this machine",
  EACCES: "permission denied (ports below 1024 need privileges)",
  ENOTFOUND: "unknown host",
  EAI_AGAIN: "host name lookup failed",
  EAI_FAIL: "host name lookup failed",
};

/**
 * The start-up error for a port that cannot be opened, naming the variable that set it:
 * `cannot listen on OPS_ADDR 127.0.0.1:9091: address in use`. A ConfigError, so the service
 * prints this one line and exits, without a stack trace.
 */
export function listenError(variable: string, address: string, err: unknown): ConfigError {
  const code = (err as NodeJS.ErrnoException)?.code;
  const reason = (code !== undefined && REASONS[code]) || (err instanceof Error ? err.message : String(err));
  return new ConfigError(`cannot listen on ${variable} ${address}: ${reason}`);
}
