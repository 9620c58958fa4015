import type { Logger } from "../log/logger.js";

/**
 * A service process's end: SIGTERM or SIGINT runs `stop` (finish in-flight work, flush traces),
 * then exits 0, or 1 when stopping failed; a second signal exits 1 at once (the operator wants
 * out now).
 */
export function stopOnSignals(stop: () => Promise<void>, log: Logger): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, "shutting down");
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err: (err as Error)?.message }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}
