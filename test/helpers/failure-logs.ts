import { beforeEach } from "vitest";
import { takeRecentLogs } from "./quiet-logger.js";

// Every test file (vitest setupFiles): a test that fails prints the warnings and errors its
// in-process services logged meanwhile (quiet-logger.ts), which its own output does not show.
// A file's first test also prints what its beforeAll hooks logged (a stack starting).
let first = true;
beforeEach(({ onTestFailed }) => {
  if (!first) takeRecentLogs();
  first = false;
  onTestFailed(() => {
    const lines = takeRecentLogs();
    if (lines.length > 0)
      console.log(`warnings and errors the services logged during this test:\n${lines.join("").trimEnd()}`);
  });
});
