import { createHash } from "node:crypto";
import { type SyncSubject, syncMessageId, syncMessageIds } from "@hookpost/api";
import { describe, expect, it } from "vitest";

/** The documented id: a digest of the JSON array [version, source, kind, key, user, value, generation]. */
function reference(s: SyncSubject, generation: string, id: string, value: string): string {
  const input = JSON.stringify(["hookpost-sync/1", s.sourceId, s.kind, s.key, id, value, generation]);
  return `${s.kind === "audience" ? "aud" : "trt"}_${createHash("sha256").update(input).digest("base64url")}`;
}

describe("sync message ids", () => {
  const subjects: SyncSubject[] = [
    { kind: "audience", sourceId: "src_1", name: "VIP", key: 'v"i\\p' },
    { kind: "trait", sourceId: "src_2", name: "LTV", key: "ünïcode" },
  ];
  const ids = ["u1", 'quote"and\\\\n', "emoji 😀 and \u2028", ""];
  const values = ["true", "false", '{"a":"\\"x"}', "null"];

  it("renders the fixed parts once and still digests exactly the documented input", () => {
    let checked = 0;
    for (const s of subjects) {
      for (const generation of ["none", 'NUID"1']) {
        const fast = syncMessageIds(s, generation);
        for (const id of ids) {
          for (const v of values) {
            expect(fast(id, v)).toBe(reference(s, generation, id, v));
            expect(syncMessageId(s, generation, id, v)).toBe(reference(s, generation, id, v));
            checked++;
          }
        }
      }
    }
    expect(checked).toBe(64);
  });

  it("differs when any part differs", () => {
    const s = subjects[0]!;
    const all = new Set([
      syncMessageId(s, "g1", "u", "true"),
      syncMessageId(s, "g2", "u", "true"),
      syncMessageId(s, "g1", "v", "true"),
      syncMessageId(s, "g1", "u", "false"),
      syncMessageId({ ...s, sourceId: "src_9" }, "g1", "u", "true"),
    ]);
    expect(all.size).toBe(5);
  });
});
