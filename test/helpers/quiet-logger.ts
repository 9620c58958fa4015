import pino from "pino";

/** The logger of the services tests start: silent, unless TEST_LOG_LEVEL asks to see them. */
export const quietLogger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
