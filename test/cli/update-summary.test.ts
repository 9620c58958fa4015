import { updateSummary } from "@hookpost/cli";
import { describe, expect, it } from "vitest";

describe("destinations update: what it says it did", () => {
  it("names the changed fields in the CLI's words and the enabled state the server returned", () => {
    expect(updateSummary(["enabled"], { enabled: false })).toBe("now disabled");
    expect(updateSummary(["enabled"], { enabled: true })).toBe("now enabled");
    expect(updateSummary(["name", "source_ids", "enabled"], { enabled: false })).toBe(
      "name, sources changed; now disabled",
    );
    expect(updateSummary(["urls", "shared_secret"], { enabled: true })).toBe("urls, shared secret changed");
  });
});
