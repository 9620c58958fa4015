import { ConfigError } from "../../lib/env/read-env.js";
import { createLogger } from "../../lib/log/logger.js";
import { dispatcherConfigFromEnv } from "./config.js";
import { startDispatcher } from "./dispatcher.js";

/** `npm run dispatcher`: one dispatcher replica, configured by the environment. */
const bootLogger = createLogger("dispatcher", "info");
let config: ReturnType<typeof dispatcherConfigFromEnv>;
try {
  config = dispatcherConfigFromEnv(process.env);
} catch (err) {
  bootLogger.fatal(
    { err: (err as Error).message },
    err instanceof ConfigError ? "bad configuration" : "start failed",
  );
  process.exit(2);
}
const logger = createLogger("dispatcher", config.logLevel);

process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));

const dispatcher = await startDispatcher(config, { logger });

let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stopping) {
      // A second signal: the operator wants out now; unacked work comes back after ack-wait.
      logger.warn({ signal }, "second signal: exiting without finishing");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, "shutting down");
    dispatcher.close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  });
}
