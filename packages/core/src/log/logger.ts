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

/** Logs to stdout, or to `destination` (tests read what would reach the log). */
export function createLogger(service: string, level = "info", destination?: pino.DestinationStream): Logger {
  const options = {
    name: service,
    level,
    base: { service },
    redact: { paths: REDACT, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
