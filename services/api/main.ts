/**
 * `npm run api` (alias `npm run ingest`): the API service as a process. Reads the configuration
 * once from the environment (packages/core/src/config/schema.ts), starts the service
 * (./ingest.ts composes its parts), and stops it gracefully on SIGTERM or SIGINT.
 */
import {
  ConfigError,
  createLogger,
  loadSettings,
  processEnvironment,
  startTracing,
  stopOnSignals,
} from "@hookpost/core";
import { ingestConfigFrom } from "./config.js";
import { startIngest } from "./ingest.js";

async function main(): Promise<void> {
  let log = createLogger("ingest");
  try {
    const settings = loadSettings("api", processEnvironment(), (oldName, newName) =>
      log.warn(`${oldName} is deprecated: use ${newName}`),
    );
    const config = ingestConfigFrom(settings);
    log = createLogger("ingest", config.logLevel);
    // Tracing hook: OpenTelemetry when OTEL_* asks for it (flushed after the service stops).
    const tracing = await startTracing("hookpost-ingest", processEnvironment(), log);
    const ingest = await startIngest(config, {
      logger: log,
      // Keys that do not open a record written since the start: one line, then out.
      onFatal: (err) => {
        log.fatal(err.message);
        process.exit(1);
      },
    });
    const { address, opsAddress: ops, httpAddress: http } = ingest;
    log.info({ address, tls: config.tls !== undefined, ops, http }, "ingest listening");
    // No input may crash the service: a stray rejection is logged, not fatal.
    process.on("unhandledRejection", (reason) => {
      log.error({ err: reason instanceof Error ? reason.message : String(reason) }, "unhandled rejection");
    });
    stopOnSignals(async () => {
      await ingest.close();
      await tracing.shutdown();
    }, log);
  } catch (err) {
    if (err instanceof ConfigError) log.fatal(err.message);
    else log.fatal({ err: (err as Error).message, stack: (err as Error).stack }, "ingest failed to start");
    process.exit(1);
  }
}

void main();
