import { AuditLog, type AuditRequestRecord } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { useHarness } from "../ingest/harness.js";

const KIB = 1024;
const h = useHarness({ topology: { auditLogMaxBytes: 256 * KIB } });

const record = (auditId: string, kind: AuditRequestRecord["actor"]["kind"]): AuditRequestRecord => ({
  kind: "request",
  auditId,
  time: new Date().toISOString(),
  actor: { kind, id: "x" },
  action: "UpdateDestination",
  resourceType: "destination",
  resourceId: "d",
  request: { blob: "y".repeat(60 * KIB) },
});

// AuditLog.append publishes the record and its usage mark side by side (Promise.all). AUDIT
// refuses what does not fit (discard new): when it is nearly full a ~60 KiB record is refused
// but its mark (a few bytes) still fits, so the source is charged 64 KiB for a record that was
// never stored, once per retry. The marks stay for AUDIT_LOG_MAX_AGE (90 days by default): a
// portal link retrying against a full log uses up its source's share with phantom records and
// stays refused long after the operator made room.
describe("audit usage marks of records the log refused", () => {
  it("charges a source nothing for a record AUDIT did not store", async () => {
    const log = await AuditLog.open(h.nc);
    // The operator's writes fill the log.
    for (let i = 0; ; i++) {
      const stored = await log.append(record(`op-${i}`, "admin")).then(
        () => true,
        () => false,
      );
      if (!stored) break;
      expect(i).toBeLessThan(10);
    }
    // A portal link's write now: refused, the link retries a few times.
    for (let i = 0; i < 3; i++)
      await expect(log.append(record(`link-${i}`, "portal_link"), "src_tenant")).rejects.toThrow();
    expect((await log.usage()).get("src_tenant") ?? 0).toBe(0);
  });
});
