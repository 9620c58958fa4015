import { beforeEach } from "vitest";
import { takeRecentLogs } from "./quiet-logger.js";

// Every test file (vitest setupFiles): a test that fails prints the warnings and errors its
// in-process services logged meanwhile (quiet-logger.ts), which its own output does not show.
beforeEach(({ onTestFailed }) => {
  takeRecentLogs();
  onTestFailed(() => {
    const lines = takeRecentLogs();
    if (lines.length > 0)
      console.log(`warnings and errors the services logged during this test:\n${lines.join("").trimEnd()}`);
  });
});
