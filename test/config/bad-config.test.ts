import { describe, expect, it } from "vitest";
import { spawnService } from "../helpers/service-process.js";

// A bad value stops a service before it connects anywhere: no NATS needed here.
describe("a service with a bad setting", () => {
  it("dispatcher: exits 2 with one line naming the variable, no stack", async () => {
    const child = spawnService("services/dispatcher/main.ts", { EVENTS_MAX_BYTES: "lots" });
    expect(await child.exited).toBe(2);
    expect(child.output).toHaveLength(1);
    expect(child.records[0]?.level).toBe(60);
    expect(child.records[0]?.msg).toBe(
      'EVENTS_MAX_BYTES must be a size in bytes or like 512KiB, 64MiB, 1GiB, got "lots"',
    );
    expect(child.output[0]).not.toContain("stack");
  });

  it("ingest: warns once about a renamed variable, then exits 1 with one line", async () => {
    const child = spawnService("services/api/main.ts", {
      PUBLISH_TIMEOUT_MS: "5000",
      WEBHOOK_TIMEOUT_MS: "not read by ingest",
      SYNC_RUN_BYTES: "1KiB",
    });
    expect(await child.exited).toBe(1);
    expect(child.records.map((r) => [r.level, r.msg])).toEqual([
      [40, "PUBLISH_TIMEOUT_MS is deprecated: use PUBLISH_TIMEOUT"],
      [60, 'SYNC_RUN_BYTES must be at least 65536 bytes, got "1KiB"'],
    ]);
    expect(child.output.join("\n")).not.toContain("stack");
  });
});
