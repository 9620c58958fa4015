import { ConfigError, createLogger, loadSettings, processEnvironment, startTracing } from "@hookpost/core";
import { type DispatcherConfig, dispatcherConfigFrom } from "./config.js";
import { startDispatcher } from "./dispatcher.js";

/** `npm run dispatcher`: one dispatcher replica, configured by the environment. */
const bootLogger = createLogger("dispatcher", "info");
let config: DispatcherConfig;
try {
  // The configuration, read once through the schema (packages/core/src/config/schema.ts).
  const settings = loadSettings("dispatcher", processEnvironment(), (oldName, newName) =>
    bootLogger.warn(`${oldName} is deprecated: use ${newName}`),
  );
  config = dispatcherConfigFrom(settings);
} catch (err) {
  // A bad value: one line naming the variable, no stack trace.
  if (err instanceof ConfigError) bootLogger.fatal(err.message);
  else bootLogger.fatal({ err: (err as Error).message }, "start failed");
  process.exit(2);
}
const logger = createLogger("dispatcher", config.logLevel);

process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));

// Tracing hook: OpenTelemetry when OTEL_* asks for it (flushed after the dispatcher stops).
const tracing = await startTracing("hookpost-dispatcher", processEnvironment(), logger).catch(
  (err: Error) => {
    logger.fatal({ err: err.message }, "bad configuration");
    process.exit(2);
  },
);
const dispatcher = await startDispatcher(config, {
  logger,
  // Keys that do not open a record written since the start: one line, then out.
  onFatal: (err) => {
    logger.fatal(err.message);
    process.exit(2);
  },
}).catch((err: unknown) => {
  // A port in use or a bad address: one line naming the variable, no stack trace.
  if (err instanceof ConfigError) logger.fatal(err.message);
  else logger.fatal({ err: (err as Error)?.message, stack: (err as Error)?.stack }, "start failed");
  process.exit(err instanceof ConfigError ? 2 : 1);
});

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
    dispatcher
      .close()
      .then(() => tracing.shutdown())
      .then(
        () => process.exit(0),
        (err) => {
          logger.error({ err }, "shutdown failed");
          process.exit(1);
        },
      );
  });
}
