import pino from "pino";

/** Records kept for a failing test's report (failure-logs.ts): the newest, at most this many. */
const KEPT = 200;
const recent: string[] = [];

/**
 * The logger of the services tests start in-process. Quiet: warnings and errors are kept in
 * memory and printed only when a test fails (a flake's cause is then in CI's output), unless
 * TEST_LOG_LEVEL asks to see records as they come.
 */
export const quietLogger = process.env.TEST_LOG_LEVEL
  ? pino({ level: process.env.TEST_LOG_LEVEL })
  : pino(
      { level: "warn" },
      {
        write(line: string) {
          recent.push(line);
          if (recent.length > KEPT) recent.shift();
        },
      },
    );

/** The kept records (JSON lines), oldest first, and forgets them. */
export function takeRecentLogs(): string[] {
  return recent.splice(0);
}
