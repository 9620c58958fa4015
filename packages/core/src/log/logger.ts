import pino, { type Logger } from "pino";

export type { Logger };

/**
 * Paths pino blanks out wherever they appear, so a secret that reaches a log call by
 * accident still never reaches the log.
 */
const REDACT = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "writeKey",
  "*.writeKey",
  "write_key",
  "*.write_key",
  "sharedSecret",
  "*.sharedSecret",
  "shared_secret",
  "*.shared_secret",
  "adminToken",
  "*.adminToken",
  "token",
  "*.token",
  "secret",
  "*.secret",
];

export function createLogger(service: string, level = "info"): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    redact: { paths: REDACT, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
