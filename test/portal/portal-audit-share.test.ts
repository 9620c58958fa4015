import { defaultSourceQuota } from "@hookpost/api";
import { Code } from "@hookpost/contract";
import { DEFAULT_TOPOLOGY } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { A, A_HOOK, B, B_HOOK, grpcAdmin, startWorld, type World } from "./portal-world.js";

const SHARE = 16 * 1024;

// The audit log refuses every admin write once full and never drops a record for room: one
// tenant's portal link writing at its rate would, within days, stop every other tenant's changes
// and the operator's.
let world: World;

beforeAll(async () => {
  world = await startWorld({ quota: { ...defaultSourceQuota(DEFAULT_TOPOLOGY), maxAuditBytes: SHARE } });
}, 120_000);

afterAll(async () => {
  await world?.close();
});

describe("each source's share of the audit log (SOURCE_MAX_AUDIT_BYTES)", () => {
  it("refuses a source's portal links once their records take its share; other sources' links and the operator go on", async () => {
    const admin = world.stack.admin;
    const a = grpcAdmin(world.stack, (await admin.createPortalLink({ sourceId: A, name: "A desk" })).token);
    const b = grpcAdmin(world.stack, (await admin.createPortalLink({ sourceId: B, name: "B desk" })).token);
    const rename = (client: typeof a, id: string, name: string) =>
      client.updateDestination({ destination: { id, name }, updateMask: { paths: ["name"] } });
    try {
      let written = 0;
      let refused: unknown;
      while (!refused && written < 100) {
        try {
          await rename(a, A_HOOK, `A hook ${written}`);
          written++;
        } catch (err) {
          refused = err;
        }
      }
      const err = refused as { code?: Code; message?: string; retryAfterMs?: number };
      expect(err?.code, err?.message).toBe(Code.RESOURCE_EXHAUSTED);
      expect(err.message).toContain("SOURCE_MAX_AUDIT_BYTES");
      // Each write leaves two records of at least 1 KiB each as charged: at most 8 fit.
      expect(written).toBeGreaterThan(0);
      expect(written).toBeLessThanOrEqual(SHARE / 2048);
      // Nothing was changed by the refused write.
      expect((await admin.getDestination({ id: A_HOOK })).destination?.name).toBe(`A hook ${written - 1}`);

      // Another source's link, and the operator, still write; the log still reads.
      await rename(b, B_HOOK, "B hook renamed");
      await rename(admin, A_HOOK, "renamed by the operator");
      const records = (await admin.listAuditRecords({ resourceId: A_HOOK })).records;
      expect(records[0]?.action).toBe("UpdateDestination");
      expect(records.length).toBeGreaterThan(written);
    } finally {
      a.close();
      b.close();
    }
  });
});
