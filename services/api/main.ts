/**
 * `npm run ingest`: the ingest service as a process. Configuration from the environment
 * (see services/api/config.ts); SIGTERM or SIGINT shut it down gracefully.
 */
import { ConfigError, createLogger, loadSettings, processEnvironment, startTracing } from "@hookpost/core";
import { ingestConfigFrom } from "./config.js";
import { startIngest } from "./ingest.js";

async function main(): Promise<void> {
  let log = createLogger("ingest");
  try {
    // The configuration, read once through the schema (packages/core/src/config/schema.ts).
    const config = ingestConfigFrom(loadSettings("api", processEnvironment(), deprecated(log)));
    log = createLogger("ingest", config.logLevel);
    // Tracing hook: OpenTelemetry when OTEL_* asks for it (flushed after the service stops).
    const tracing = await startTracing("hookpost-ingest", processEnvironment(), log);
    const ingest = await startIngest(config, { logger: log });
    log.info(
      {
        address: ingest.address,
        tls: config.tls !== undefined,
        ops: ingest.opsAddress,
        http: ingest.httpAddress,
      },
      "ingest listening",
    );
    // No input may crash the service: a stray rejection is logged, not fatal.
    process.on("unhandledRejection", (reason) => {
      log.error({ err: reason instanceof Error ? reason.message : String(reason) }, "unhandled rejection");
    });
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, "second signal: exiting at once");
        process.exit(1);
      }
      stopping = true;
      log.info({ signal }, "shutting down");
      ingest
        .close()
        .then(() => tracing.shutdown())
        .then(
          () => process.exit(0),
          (err: unknown) => {
            log.error({ err: (err as Error).message }, "shutdown failed");
            process.exit(1);
          },
        );
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  } catch (err) {
    if (err instanceof ConfigError) log.fatal(err.message);
    else log.fatal({ err: (err as Error).message, stack: (err as Error).stack }, "ingest failed to start");
    process.exit(1);
  }
}

function deprecated(log: ReturnType<typeof createLogger>) {
  return (oldName: string, newName: string) => log.warn(`${oldName} is deprecated: use ${newName}`);
}

void main();
